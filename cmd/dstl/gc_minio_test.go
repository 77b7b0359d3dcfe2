package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/backends/s3"
	"github.com/dstlgo/dstl/dstl/objname"
)

// writerEnv, set in the environment of a process started from the test
// binary, makes TestGCAbortsUploadsAfterKills a writer on the base path
// it holds instead of the test.
const writerEnv = "DSTL_GC_TEST_WRITER_BASE"

// slowBody is a body of size bytes whose reads past the first part block
// for a second each: its multipart upload stays in progress.
type slowBody struct{ size, part int64 }

func (b slowBody) ReadAt(p []byte, off int64) (int, error) {
	if off >= b.part {
		time.Sleep(time.Second)
	}
	n := min(int64(len(p)), b.size-off)
	clear(p[:n])
	if n < int64(len(p)) {
		return int(n), fmt.Errorf("read past the end at %d", off+n)
	}
	return int(n), nil
}

// runWriter puts large objects under "job/" one after another, each a
// multipart upload, printing each name before its put, until killed.
func runWriter(base string) {
	ctx := context.Background()
	b, _, err := backends.Open(ctx, "", base)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	for {
		name, err := objname.NewLog("job/", 0)
		if err != nil {
			os.Exit(1)
		}
		fmt.Println("put", name)
		if err := b.Put(ctx, name, slowBody{size: 3 * s3.MinPartSize, part: s3.MinPartSize}, 3*s3.MinPartSize); err != nil {
			fmt.Println("error:", err)
		}
	}
}

// TestGCAbortsUploadsAfterKills: writer processes killed (SIGKILL) in the
// middle of multipart uploads to MinIO leave incomplete uploads; gc lists
// them (MinIO lists uploads only by exact key or for the whole bucket), a
// dry run leaves them, and gc with a grace of 0 aborts every one of the
// job's, and only the job's.
func TestGCAbortsUploadsAfterKills(t *testing.T) {
	if base := os.Getenv(writerEnv); base != "" {
		runWriter(base)
		return
	}
	var env []string
	for _, n := range []string{"DSTL_S3_ENDPOINT", "DSTL_S3_REGION", "DSTL_S3_ACCESS_KEY", "DSTL_S3_SECRET_KEY", "DSTL_S3_BUCKET"} {
		v := os.Getenv(n)
		if v == "" {
			t.Skipf("%s not set: this test needs MinIO (run it under minio-test/with-emulators.sh, or `make emulators-up` and load the settings)", n)
		}
		env = append(env, v)
	}
	endpoint, region, bucket := env[0], env[1], env[4]
	t.Setenv("AWS_ACCESS_KEY_ID", env[2])
	t.Setenv("AWS_SECRET_ACCESS_KEY", env[3])
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	root := "dstl-gc-test/" + strings.ToLower(rand.Text()[:12])
	query := "?endpoint=" + endpoint + "&region=" + region + "&use_path_style=true&part_size=5MiB&concurrency=1"
	base := "s3://" + bucket + "/" + root + query

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b, err := s3.New(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	// What the job has, as S3 lists it: the whole bucket's uploads, by key.
	jobUploads := func() map[string]bool {
		t.Helper()
		ids := map[string]bool{}
		in := &awss3.ListMultipartUploadsInput{Bucket: &bucket}
		for {
			out, err := b.Client().ListMultipartUploads(ctx, in)
			if err != nil {
				t.Fatalf("ListMultipartUploads: %v", err)
			}
			for _, u := range out.Uploads {
				if strings.HasPrefix(aws.ToString(u.Key), root+"/job/") {
					ids[aws.ToString(u.UploadId)] = true
				}
			}
			if !aws.ToBool(out.IsTruncated) {
				return ids
			}
			in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
		}
	}
	t.Cleanup(func() { // what a failed test leaves
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		b.ListIncompleteUploads(cctx, "", func(u s3.IncompleteUpload) error { return b.AbortIncompleteUpload(cctx, u) }, nil)
	})
	// An upload of another job beside it, which gc must leave alone.
	other := root + "/other/x.dstl"
	out, err := b.Client().CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &bucket, Key: &other})
	if err != nil {
		t.Fatal(err)
	}
	otherID := aws.ToString(out.UploadId)

	const kills = 3
	for i := range kills {
		before := len(jobUploads())
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestGCAbortsUploadsAfterKills$", "-test.count=1")
		cmd.Env = append(os.Environ(), writerEnv+"="+base)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stdout)
		if !lines.Scan() || !strings.HasPrefix(lines.Text(), "put ") {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("writer %d: %q, %v", i, lines.Text(), lines.Err())
		}
		// Kill it once its upload is started (its parts past the first
		// take seconds).
		deadline := time.Now().Add(20 * time.Second)
		for len(jobUploads()) == before && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cmd.Wait()
		if n := len(jobUploads()); n != before+1 {
			t.Fatalf("after kill %d: %d incomplete uploads of the job, want %d", i+1, n, before+1)
		}
	}
	left := jobUploads()
	time.Sleep(10 * time.Millisecond) // older than a grace of 0 by both clocks

	gcArgs := []string{"gc", "--json", "--base-path", base, "--job-id", "job", "--grace", "0", "--keep-none"}
	for _, dryRun := range []bool{true, false} {
		args := gcArgs
		if dryRun {
			args = append(args, "--dry-run")
		}
		code, out, errOut := runCLI(t, args...)
		var rep gcReport
		if err := json.Unmarshal([]byte(out), &rep); code != exitOK || err != nil {
			t.Fatalf("dry run %v: exit %d, %v\n%s\n%s", dryRun, code, err, out, errOut)
		}
		if !rep.UploadsChecked || rep.UploadsListed != kills || len(rep.Uploads) != kills {
			t.Errorf("dry run %v: report %+v, want %d uploads", dryRun, rep, kills)
		}
		for _, u := range rep.Uploads {
			if !left[u.UploadID] || u.Aborted == dryRun || !strings.HasPrefix(u.Name, "job/") {
				t.Errorf("dry run %v: upload %+v", dryRun, u)
			}
		}
		if want := map[bool]int{true: 0, false: kills}[dryRun]; rep.UploadsAborted != want {
			t.Errorf("dry run %v: %d aborted, want %d", dryRun, rep.UploadsAborted, want)
		}
		if got, want := len(jobUploads()), map[bool]int{true: kills, false: 0}[dryRun]; got != want {
			t.Errorf("dry run %v: %d incomplete uploads of the job left, want %d", dryRun, got, want)
		}
	}
	// The other job's upload is still there.
	if _, err := b.Client().ListParts(ctx, &awss3.ListPartsInput{Bucket: &bucket, Key: &other, UploadId: &otherID}); err != nil {
		t.Errorf("the other job's upload: %v", err)
	}
}
