package statestore_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// checkpointer and storage the tests open must stop all of its goroutines
// on Close.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
