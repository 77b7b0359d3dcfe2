//go:build !unix

package main

// settle does nothing where there is no sync(2).
func settle() {}
