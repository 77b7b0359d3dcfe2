package statestore

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// A Codec turns keys or values of type T into bytes and back. Stores log and
// snapshot the bytes, and compute a key's key group from its encoding, so a
// key codec must be deterministic: equal keys encode to equal bytes, in every
// process and version.
//
// The key-value and window stores keep their keys in the order of their
// encodings (bytes compared lexicographically): range and prefix scans follow
// it. StringCodec, BytesCodec, Uint64Codec and Int64Codec preserve the natural
// order of their type; JSONCodec does not.
type Codec[T any] interface {
	// Encode appends the encoding of v to dst and returns the result; it
	// must not keep dst. The result may instead be memory that dst does
	// not hold (v's own bytes, say): the stores never write into such a
	// result, nor encode the next value into it, and read it only until
	// the call that encoded it (a Put, a Snapshot) returns, so it must
	// stay unchanged until then.
	Encode(dst []byte, v T) ([]byte, error)
	// Decode decodes b. It must not keep b.
	Decode(b []byte) (T, error)
}

// StringCodec encodes a string as its bytes.
type StringCodec struct{}

// Encode appends v.
func (StringCodec) Encode(dst []byte, v string) ([]byte, error) { return append(dst, v...), nil }

// Decode returns b as a string.
func (StringCodec) Decode(b []byte) (string, error) { return string(b), nil }

// BytesCodec encodes a byte slice as itself.
type BytesCodec struct{}

// Encode appends v.
func (BytesCodec) Encode(dst []byte, v []byte) ([]byte, error) { return append(dst, v...), nil }

// Decode returns a copy of b.
func (BytesCodec) Decode(b []byte) ([]byte, error) { return append([]byte(nil), b...), nil }

// Uint64Codec encodes a uint64 in 8 bytes, big-endian, which preserves order.
type Uint64Codec struct{}

// Encode appends v, big-endian.
func (Uint64Codec) Encode(dst []byte, v uint64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(dst, v), nil
}

// Decode decodes 8 big-endian bytes.
func (Uint64Codec) Decode(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("statestore: uint64: %d bytes, want 8", len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}

// Int64Codec encodes an int64 in 8 bytes, big-endian with the sign bit
// flipped, so that the encodings sort like the numbers.
type Int64Codec struct{}

// Encode appends v.
func (Int64Codec) Encode(dst []byte, v int64) ([]byte, error) {
	return binary.BigEndian.AppendUint64(dst, uint64(v)^(1<<63)), nil
}

// Decode decodes what Encode wrote.
func (Int64Codec) Decode(b []byte) (int64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("statestore: int64: %d bytes, want 8", len(b))
	}
	return int64(binary.BigEndian.Uint64(b) ^ (1 << 63)), nil
}

// JSONCodec encodes values with encoding/json. Its encodings do not sort
// like the values: use it for values, or for keys when order does not
// matter. Encoding a map sorts its keys, so equal maps encode alike.
type JSONCodec[T any] struct{}

// Encode appends the JSON encoding of v.
func (JSONCodec[T]) Encode(dst []byte, v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return dst, fmt.Errorf("statestore: json: %w", err)
	}
	return append(dst, b...), nil
}

// Decode decodes JSON.
func (JSONCodec[T]) Decode(b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("statestore: json: %w", err)
	}
	return v, nil
}
