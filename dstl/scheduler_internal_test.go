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
			t.sets = append(t.sets, &changeSet{sqn: SequenceNumber(n)})
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

// TestCheckOutputJudgesByTheWritersSets: an uploader that rewrote the
// change sets it was given is judged by the writer's own sets, not by what
// it left in ChangeSets.
func TestCheckOutputJudgesByTheWritersSets(t *testing.T) {
	task := &UploadTask{LogID: NewLogID()}
	task.ChangeSets = []*format.ChangeSet{{LogID: task.LogID, SequenceNumber: 107}} // rewritten from 7
	task.sets = []*changeSet{{sqn: 7}}
	out := &UploadOutput{
		Objects: []StoredObject{{Name: "o", Size: 30}},
		Tasks:   []TaskResult{{task, []UploadResult{{SequenceNumber: 107, Object: "o", Length: 10}}}},
	}
	if err := checkOutput([]*UploadTask{task}, out); !errors.Is(err, errBadOutput) {
		t.Fatalf("checkOutput = %v, want errBadOutput for a result of change set 107 where the writer gave 7", err)
	}
	task.ChangeSets = nil // shortened by the uploader
	out.Tasks[0].Results[0].SequenceNumber = 7
	if err := checkOutput([]*UploadTask{task}, out); err != nil {
		t.Fatalf("checkOutput = %v for a result matching the writer's set", err)
	}
}
