package main

import (
	"flag"
	"fmt"
	"iter"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// The input stands in for a partitioned stream, such as a Kafka topic:
// one partition per key group, partition kg holding -records records,
// record i being an amount for one of the keys of key group kg. A
// partition delivers -rate records a second from the moment a consumer
// subscribes to it or seeks in it, so that the service reads it as it
// arrives. Any record can be produced again from its partition and offset
// alone.
var (
	records int64   = 400
	rate    float64 = 50
)

// inputFlags declares the input's flags.
func inputFlags(fs *flag.FlagSet) {
	fs.Int64Var(&records, "records", records, "records in each input partition (one partition per key group)")
	fs.Float64Var(&rate, "rate", rate, "records a partition delivers per second")
}

// consumer reads the input partitions of a range of key groups, as a
// Kafka consumer reads its partitions.
type consumer struct {
	next  map[int]int64 // by key group: the offset of the next record
	from  map[int]int64 // the offset each partition was read from
	start time.Time     // when
	turn  int           // the partition to read first in the next Poll
}

// subscribe returns a consumer of the partitions of key groups kgr, each
// read from its first record (see Seek).
func subscribe(kgr dstl.KeyGroupRange) *consumer {
	c := &consumer{next: map[int]int64{}, from: map[int]int64{}, start: time.Now(), turn: kgr.Start}
	for kg := kgr.Start; kg <= kgr.End; kg++ {
		c.next[kg], c.from[kg] = 0, 0
	}
	return c
}

// Seek moves the consumer's partitions to the offsets that Offsets
// returned, by partition: those of other partitions are ignored.
func (c *consumer) Seek(offsets map[string]string) error {
	for k, v := range offsets {
		kg, err := strconv.Atoi(k)
		if err != nil {
			return fmt.Errorf("input: partition %q: %w", k, err)
		}
		if _, ok := c.next[kg]; !ok {
			continue
		}
		off, err := strconv.ParseInt(v, 10, 64)
		if err != nil || off < 0 || off > records {
			return fmt.Errorf("input: offset %q of partition %d: want 0 to %d", v, kg, records)
		}
		c.next[kg], c.from[kg] = off, off
	}
	c.start = time.Now()
	return nil
}

// Offsets returns the offset of the next record of each partition, by
// partition.
func (c *consumer) Offsets() map[string]string {
	out := map[string]string{}
	for kg, off := range c.next {
		out[strconv.Itoa(kg)] = strconv.FormatInt(off, 10)
	}
	return out
}

// Poll yields the records that arrived, at most limit, round robin over
// the partitions; the consumer moves past each record it yields.
func (c *consumer) Poll(limit int) iter.Seq2[string, int64] {
	return func(yield func(string, int64) bool) {
		arrived := int64(time.Since(c.start).Seconds() * rate)
		for n, idle := 0, 0; n < limit && idle < len(c.next); c.turn++ {
			kg := c.turn % keyGroups
			off, ok := c.next[kg]
			if !ok {
				continue
			}
			if off >= records || off >= c.from[kg]+arrived {
				idle++
				continue
			}
			idle = 0
			key, amount := record(kg, off)
			c.next[kg] = off + 1
			n++
			if !yield(key, amount) {
				return
			}
		}
	}
}

// record returns record i of partition kg.
func record(kg int, i int64) (key string, amount int64) {
	r := rand.New(rand.NewPCG(uint64(kg), uint64(i)))
	keys := keysOf[kg]
	return keys[r.IntN(len(keys))], 1 + r.Int64N(100)
}

// keysOf holds, by key group, four keys ("user-N") of that key group.
var keysOf = func() [keyGroups][]string {
	var out [keyGroups][]string
	for n, left := 0, 4*keyGroups; left > 0; n++ {
		key := fmt.Sprintf("user-%d", n)
		kg := statestore.KeyGroup([]byte(key), keyGroups) // StringCodec encodes a string as its bytes
		if len(out[kg]) < 4 {
			out[kg] = append(out[kg], key)
			left--
		}
	}
	return out
}()

// totalsUpTo returns the totals by key of the records before offsets
// (by key group), computed from the input alone.
func totalsUpTo(offsets map[int]int64) map[string]int64 {
	totals := map[string]int64{}
	for kg, end := range offsets {
		for i := range end {
			key, amount := record(kg, i)
			totals[key] += amount
		}
	}
	return totals
}
