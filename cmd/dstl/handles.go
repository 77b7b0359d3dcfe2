package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/dstlgo/dstl/backends"
	"github.com/dstlgo/dstl/dstl"
	"github.com/dstlgo/dstl/statestore"
)

// handleFileHelp describes the files that --keep and --handle read.
const handleFileHelp = `A handle file holds what a checkpoint keeps of a writer's log: either one
handle in the binary encoding (Handle.MarshalBinary, starting with "DSTH"),
or handles in the JSON encoding (Handle.MarshalJSON): one object, an array
of them, or several objects one after another (e.g. one per line).`

// parseKeepFile decodes the contents of the file path that readKeepFile
// reads.
func parseKeepFile(path string, data []byte) ([]dstl.Handle, []statestore.CheckpointHandle, error) {
	if bytes.HasPrefix(data, []byte(checkpointHandleMagic)) {
		var h statestore.CheckpointHandle
		if err := h.UnmarshalBinary(data); err != nil {
			return nil, nil, fmt.Errorf("checkpoint handle file %s: %w: %w", path, dstl.ErrInvalidHandle, err)
		}
		return nil, []statestore.CheckpointHandle{h}, nil
	}
	hs, err := parseHandles(data)
	if err != nil {
		if !errors.Is(err, dstl.ErrInvalidHandle) {
			err = fmt.Errorf("%w: %w", dstl.ErrInvalidHandle, err)
		}
		return nil, nil, fmt.Errorf("handle file %s: %w", path, err)
	}
	return hs, nil, nil
}

// parseHandles decodes the contents of a handle file.
func parseHandles(data []byte) ([]dstl.Handle, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	switch {
	case bytes.HasPrefix(data, []byte("DSTH")):
		var h dstl.Handle
		if err := h.UnmarshalBinary(data); err != nil {
			return nil, err
		}
		return []dstl.Handle{h}, nil
	case len(trimmed) > 0 && trimmed[0] == '[':
		var raw []json.RawMessage
		if err := json.Unmarshal(trimmed, &raw); err != nil {
			return nil, fmt.Errorf("%w: not a JSON array of handles: %w", dstl.ErrInvalidHandle, err)
		}
		hs := make([]dstl.Handle, len(raw))
		for i, r := range raw {
			if err := hs[i].UnmarshalJSON(r); err != nil {
				return nil, fmt.Errorf("handle %d of the array: %w", i+1, err)
			}
		}
		return hs, nil
	case len(trimmed) > 0 && trimmed[0] == '{':
		var hs []dstl.Handle
		dec := json.NewDecoder(bytes.NewReader(trimmed))
		for {
			var r json.RawMessage
			if err := dec.Decode(&r); errors.Is(err, io.EOF) {
				return hs, nil
			} else if err != nil {
				return nil, fmt.Errorf("%w: handle %d: not JSON: %w", dstl.ErrInvalidHandle, len(hs)+1, err)
			}
			var h dstl.Handle
			if err := h.UnmarshalJSON(r); err != nil {
				return nil, fmt.Errorf("handle %d: %w", len(hs)+1, err)
			}
			hs = append(hs, h)
		}
	case len(trimmed) == 0:
		return nil, fmt.Errorf("%w: the file is empty", dstl.ErrInvalidHandle)
	}
	return nil, fmt.Errorf(`%w: neither a binary handle (starting with "DSTH") nor JSON handles`, dstl.ErrInvalidHandle)
}

// splitObjectURL splits the URL of an object into the base path of its
// directory (with the URL's query, which configures the backend) and the
// object's name in it: "s3://b/job/x.dstl?region=r" gives
// "s3://b/job?region=r" and "x.dstl". ok is false when s is not a URL
// (then it is a local file).
func splitObjectURL(s string) (base, name string, ok bool, err error) {
	scheme, hasScheme := backends.URLScheme(s)
	if !hasScheme || !strings.HasPrefix(s[len(scheme):], "://") {
		return "", "", false, nil
	}
	u, perr := url.Parse(s)
	if perr != nil {
		if ue, ok := perr.(*url.Error); ok {
			perr = ue.Err
		}
		return "", "", true, fmt.Errorf("object URL %q is not a valid URL: %w", backends.RedactURL(s), perr)
	}
	i := strings.LastIndex(u.Path, "/")
	if i < 0 || i == len(u.Path)-1 {
		return "", "", true, fmt.Errorf("object URL %q names no object (want SCHEME://BUCKET/.../NAME)", u.Redacted())
	}
	name = u.Path[i+1:]
	b := *u
	b.Path, b.RawPath = u.Path[:i], ""
	return b.String(), name, true, nil
}
