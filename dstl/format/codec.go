package format

import (
	"hash/crc32"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// castagnoli is the CRC32C table used by every checksum of the format.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// zstdMaxRatio bounds how many bytes one stored zstd byte can decode to: a
// zstd block decodes to at most 128 KiB and takes at least 4 bytes. A frame
// declaring a larger uncompressed size than its stored payload allows is
// corrupt, so a lying length cannot make the decoder allocate much more than
// the bytes it was given.
const zstdMaxRatio = (128 << 10) / 4

// The zstd encoder and decoder are created on first use and shared: their
// EncodeAll and DecodeAll methods are safe for concurrent use.
var (
	zstdEncoder = sync.OnceValues(func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedFastest),
			// The frame's CRC32C already covers the payload.
			zstd.WithEncoderCRC(false),
		)
	})
	zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
		return zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(0),
			zstd.WithDecoderMaxMemory(MaxPayloadSize),
			// DecodeAll never grows dst past its capacity, which the
			// decoder sets to the declared uncompressed size.
			zstd.WithDecodeAllCapLimit(true),
		)
	})
)
