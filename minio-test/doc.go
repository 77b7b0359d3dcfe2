// Package miniotest checks the emulator harness with raw SDK round trips,
// apart from dstl's backends: when a backend's conformance test fails on
// an emulator, these tests tell a fault of the emulator or of its
// settings from one of the backend.
//
// Each test talks to one emulator through its cloud SDK, with the settings
// that emulator needs: MinIO through aws-sdk-go-v2, fake-gcs-server through
// cloud.google.com/go/storage and Azurite through azblob. The tests find the
// emulators through environment variables (DSTL_S3_*, DSTL_GCS_* and
// DSTL_AZURE_*), which `make test` sets after starting all three, and skip,
// naming the missing variables, when they are not set. The package holds no
// code of its own.
package miniotest
