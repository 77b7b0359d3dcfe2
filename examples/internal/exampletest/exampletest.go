// Package exampletest holds what the examples' tests share: where a test's
// job goes.
package exampletest

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// BasePath returns where a test's job goes: a new directory under root in
// the MinIO bucket when the emulators' settings are in the environment
// (`make test` starts MinIO and sets them), else a temporary directory.
// On MinIO it sets the credentials in the environment, so that the child
// processes the test starts inherit them.
func BasePath(t *testing.T, root string) string {
	t.Helper()
	env := map[string]string{}
	for _, n := range []string{"DSTL_S3_ENDPOINT", "DSTL_S3_REGION", "DSTL_S3_ACCESS_KEY", "DSTL_S3_SECRET_KEY", "DSTL_S3_BUCKET"} {
		if env[n] = os.Getenv(n); env[n] == "" {
			t.Logf("%s not set: on a local directory", n)
			return t.TempDir()
		}
	}
	t.Setenv("AWS_ACCESS_KEY_ID", env["DSTL_S3_ACCESS_KEY"])
	t.Setenv("AWS_SECRET_ACCESS_KEY", env["DSTL_S3_SECRET_KEY"])
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	dir := root + "/" + strings.ToLower(uuid.NewString()[:8])
	base := fmt.Sprintf("s3://%s/%s?endpoint=%s&region=%s&use_path_style=true",
		env["DSTL_S3_BUCKET"], dir, env["DSTL_S3_ENDPOINT"], env["DSTL_S3_REGION"])
	t.Logf("on MinIO: %s", base)
	return base
}
