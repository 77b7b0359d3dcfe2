package format_test

import (
	"bytes"
	"errors"
	"fmt"
	"log"

	"github.com/dstlgo/dstl/dstl/format"
)

// Encode two change sets into one object, then read them back: the whole
// object at once, and one frame alone as a ranged read would fetch it.
func Example() {
	var obj bytes.Buffer
	enc := format.NewEncoder(&obj, format.EncoderOptions{Compression: true})
	var frames []format.FrameInfo
	for sqn, value := range []string{"v1", "v2"} {
		fi, err := enc.WriteChangeSet(&format.ChangeSet{
			LogID:          [16]byte{0x01},
			SequenceNumber: uint64(sqn),
			Groups: []format.Group{
				{KeyGroup: format.MetaKeyGroup, Changes: [][]byte{[]byte("schema")}},
				{KeyGroup: 7, Changes: [][]byte{[]byte("k=" + value)}},
			},
		})
		if err != nil {
			log.Fatal(err)
		}
		frames = append(frames, fi)
	}
	if err := enc.Close(); err != nil {
		log.Fatal(err)
	}
	data := obj.Bytes()

	// Validate and decode everything.
	index, sets, err := format.DecodeObject("jobs/j1/obj-1", data)
	if err != nil {
		log.Fatal(err)
	}
	for i, cs := range sets {
		fmt.Printf("frame at %d, %d bytes: sqn %d, %d groups\n", index[i].Offset, index[i].Length, cs.SequenceNumber, len(cs.Groups))
	}

	// Decode the second frame from its bytes alone.
	fi := frames[1]
	cs, err := format.DecodeFrame("jobs/j1/obj-1", fi.Offset, data[fi.Offset:fi.Offset+fi.Length])
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("key group %d: %s\n", cs.Groups[1].KeyGroup, cs.Groups[1].Changes[0])

	// Damage is reported with the object and the offset.
	data[fi.Offset+20] ^= 1
	_, err = format.DecodeFrame("jobs/j1/obj-1", fi.Offset, data[fi.Offset:fi.Offset+fi.Length])
	fmt.Println(errors.Is(err, format.ErrChecksum))
	fmt.Println(err)
	// Output:
	// frame at 8, 88 bytes: sqn 0, 2 groups
	// frame at 96, 88 bytes: sqn 1, 2 groups
	// key group 7: k=v2
	// true
	// dstl/format: object "jobs/j1/obj-1" at offset 180: checksum mismatch: frame CRC32C is 0xfeedb1f3, computed 0x8ae35ef1 over 84 bytes from offset 96
}
