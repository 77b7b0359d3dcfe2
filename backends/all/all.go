// Package all links every dstl backend into a program, like importing the
// database/sql drivers one wants:
//
//	import _ "github.com/dstlgo/dstl/backends/all"
//
// Programs that need only some backends import those packages instead, so
// that only their SDKs are linked.
package all

import (
	_ "github.com/dstlgo/dstl/backends/azure"   // azure, azblob://
	_ "github.com/dstlgo/dstl/backends/gcs"     // gcs, gs://
	_ "github.com/dstlgo/dstl/backends/gocloud" // gocloud, mem:// (and any gocloud.dev URL by identifier)
	_ "github.com/dstlgo/dstl/backends/local"   // local, file://
	_ "github.com/dstlgo/dstl/backends/s3"      // s3, s3://
)
