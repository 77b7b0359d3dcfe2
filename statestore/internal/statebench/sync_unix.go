//go:build unix

package main

import "syscall"

// settle writes every dirty page back to disk, so that what a step left
// in the page cache does not slow the next.
func settle() { syscall.Sync() }
