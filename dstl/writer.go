package dstl

// Writer appends one operator instance's changes. (Being written.)
type Writer struct{}

type changeSet struct{}
