//go:build race

package dstl

func init() { poisonReleased = true }
