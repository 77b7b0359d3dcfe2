package main

import (
	"strings"
	"testing"
)

// TestObjectURLErrorsHideSecrets: the error of an object URL that does not
// parse shows neither its user information nor its signature.
func TestObjectURLErrorsHideSecrets(t *testing.T) {
	for _, s := range []string{
		"s3://AKIA:SECRET@b/a%zz/x.dstl",
		"azblob://c/a%zz/x.dstl?sig=SECRET",
	} {
		_, _, _, err := splitObjectURL(s)
		if err == nil {
			t.Fatalf("%s: no error", s)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: error shows a secret: %v", s, err)
		}
	}
}
