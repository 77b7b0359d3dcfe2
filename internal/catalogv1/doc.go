// Package catalogv1 is the checkpoint catalog's first object layout
// (catalog objects of version 1 under JOB/_catalog/gGENERATION/), as the
// releases before the second layout wrote and read it.
//
// Package catalog reads such a catalog once, when a job upgrades to the
// second layout: it restores the latest complete checkpoint recorded here
// and fences the processes that still run this layout. The tests of the
// upgrade also run this package's members as the processes of an older
// release. Nothing else uses it, and it does not change.
package catalogv1
