package dstl

import (
	"errors"
	"testing"

	"github.com/dstlgo/dstl/dstl/format"
)

func TestCheckOutput(t *testing.T) {
	task := func(sqns ...uint64) *UploadTask {
		t := &UploadTask{LogID: NewLogID()}
		for _, n := range sqns {
			t.ChangeSets = append(t.ChangeSets, &format.ChangeSet{LogID: t.LogID, SequenceNumber: n})
		}
		return t
	}
	a, b := task(1, 2), task(7)
	res := func(sqn SequenceNumber) UploadResult {
		return UploadResult{SequenceNumber: sqn, Object: "o", Offset: 0, Length: 10}
	}
	objects := []StoredObject{{Name: "o", Size: 30}}
	for _, tc := range []struct {
		name string
		out  *UploadOutput
		ok   bool
	}{
		{"valid", &UploadOutput{Objects: objects, Tasks: []TaskResult{{a, []UploadResult{res(1), res(2)}}, {b, []UploadResult{res(7)}}}}, true},
		{"any task order", &UploadOutput{Objects: objects, Tasks: []TaskResult{{b, []UploadResult{res(7)}}, {a, []UploadResult{res(1), res(2)}}}}, true},
		{"nil output", nil, false},
		{"a task missing", &UploadOutput{Objects: objects, Tasks: []TaskResult{{a, []UploadResult{res(1), res(2)}}}}, false},
		{"a task twice", &UploadOutput{Objects: objects, Tasks: []TaskResult{{a, []UploadResult{res(1), res(2)}}, {a, []UploadResult{res(1), res(2)}}}}, false},
		{"a foreign task", &UploadOutput{Objects: objects, Tasks: []TaskResult{{a, []UploadResult{res(1), res(2)}}, {task(7), []UploadResult{res(7)}}}}, false},
		{"a result missing", &UploadOutput{Objects: objects, Tasks: []TaskResult{{a, []UploadResult{res(1)}}, {b, []UploadResult{res(7)}}}}, false},
		{"results out of order", &UploadOutput{Objects: objects, Tasks: []TaskResult{{a, []UploadResult{res(2), res(1)}}, {b, []UploadResult{res(7)}}}}, false},
		{"an object not written", &UploadOutput{Tasks: []TaskResult{{a, []UploadResult{res(1), res(2)}}, {b, []UploadResult{res(7)}}}}, false},
		{"an empty result", &UploadOutput{Objects: objects, Tasks: []TaskResult{{a, []UploadResult{res(1), {SequenceNumber: 2, Object: "o"}}}, {b, []UploadResult{res(7)}}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkOutput([]*UploadTask{a, b}, tc.out)
			if tc.ok && err != nil {
				t.Fatalf("checkOutput: %v", err)
			}
			if !tc.ok && !errors.Is(err, errBadOutput) {
				t.Fatalf("checkOutput = %v, want %v", err, errBadOutput)
			}
		})
	}
}
