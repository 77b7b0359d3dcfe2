// Package catalogv1 is the checkpoint catalog's first object layout
// (catalog objects of version 1 under JOB/_catalog/gGENERATION/), as the
// releases before the second layout wrote and read it.
//
// Package catalog reads such a catalog once, when a job upgrades to the
// second layout: it restores the latest complete checkpoint recorded here
// and fences the processes that still run this layout. Package kafkastate,
// whose releases before checkpoint records kept one instance per
// partition here, restores each partition that has no record from it and
// fences the same way. The tests of the upgrades also run this package's
// members as the processes of an older release. Nothing else uses it, and
// its layout does not change.
package catalogv1
