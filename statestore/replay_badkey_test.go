package statestore

import (
	"errors"
	"testing"
)

// TestReplayBadKeyDeletedLast: a key that does not decode (a damaged
// entry) fails a restore as ApplyChange fails on it, whatever its last
// change is.
func TestReplayBadKeyDeletedLast(t *testing.T) {
	bad := []byte("short") // not 8 bytes: Uint64Codec rejects it
	kg := KeyGroup(bad, 16)
	put := Change{KeyGroup: kg, Key: bad, Value: []byte("v")}
	del := Change{KeyGroup: kg, Key: bad, Tombstone: true}

	a, _ := NewKeyValueStore("kv", nil, Uint64Codec{}, StringCodec{}, WithMaxParallelism(16))
	if err := a.ApplyChange(del); !errors.Is(err, ErrLogFormat) {
		t.Errorf("ApplyChange of the tombstone: %v, want ErrLogFormat", err)
	}
	for name, seq := range map[string][]Change{"delete": {del}, "put then delete": {put, del}} {
		s, _ := NewKeyValueStore("kv", nil, Uint64Codec{}, StringCodec{}, WithMaxParallelism(16))
		var err error
		for _, c := range seq {
			if err = s.replayChange(c); err != nil {
				break
			}
		}
		if err == nil {
			err = s.endReplay()
		}
		if !errors.Is(err, ErrLogFormat) {
			t.Errorf("replay of %s of an undecodable key: %v, want ErrLogFormat", name, err)
		}
	}
}
