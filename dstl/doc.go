// Package dstl is a durable short-term log (DSTL) for the state changes of
// stream processors, kept on object storage.
//
// A [Storage] exists once per job and process. It opens one [Writer] per
// operator instance; a writer owns a range of key groups. Operators append
// opaque changes to a key group ([Writer.Append]) or as metadata
// ([Writer.AppendMeta]). Changes are grouped into change sets by sequence
// number; [Writer.NextSequenceNumber] closes the active set and marks a
// checkpoint boundary. [Writer.Persist] captures every change set from a
// sequence number on and uploads it in the background; the returned
// [Future] resolves to a [Handle] that lists the stored bytes.
//
// The change sets of all writers of a storage that reach the scheduler within
// the batching window are written into one object, so the number of requests
// stays flat as the number of operators grows. Objects are reference-counted
// by the change sets they hold and deleted once nothing refers to them, unless
// a checkpoint was confirmed with them ([Writer.Confirm]), in which case they
// belong to the checkpoint owner.
//
// After a crash, a [Reader] reads a handle back: it fetches only the byte
// ranges the handle needs and yields the changes, metadata first.
//
// With local recovery, given by the option [WithLocalRecovery] (package
// github.com/dstlgo/dstl/duplicating implements it) and turned on by
// [Config.LocalRecoveryEnabled], every object also gets a local copy; a
// persist then returns a local handle too, [Reader.ReadPreferLocal] reads
// it with a fallback to the backend, and [Storage.CleanLocalCopies] deletes
// what a crashed run left.
//
// The storage services are behind package github.com/dstlgo/dstl/backends
// (the backend contract, its errors, opening one by URL) and the packages
// under backends/; package github.com/dstlgo/dstl/uploader is the seam for
// uploaders of one's own.
package dstl
