package backends

import (
	"errors"
	"net/url"
	"strings"
)

// Redacted is what [RedactURL] puts in place of a secret.
const Redacted = "REDACTED"

// RedactURL returns s, a base path or a URL, with what may be a secret
// replaced by [Redacted], for error text and logs: the user information of
// a URL ("s3://KEY:SECRET@bucket" gives "s3://REDACTED@bucket"), and the
// values of query parameters whose names speak of a signature, key,
// secret, token, password, credential or SAS ("sig=..." of an Azure SAS,
// "X-Amz-Signature=..."). It works on the text alone, so that a URL that
// does not parse is redacted too; other text is returned as it is.
func RedactURL(s string) string {
	rest, frag, hasFrag := strings.Cut(s, "#")
	head, query, hasQuery := strings.Cut(rest, "?")
	if i := strings.Index(head, "://"); i >= 0 {
		auth := head[i+3:]
		end := strings.IndexByte(auth, '/')
		if end < 0 {
			end = len(auth)
		}
		if at := strings.LastIndexByte(auth[:end], '@'); at >= 0 {
			head = head[:i+3] + Redacted + auth[at:]
		}
	}
	if hasQuery {
		params := strings.Split(query, "&")
		for j, p := range params {
			if k, _, ok := strings.Cut(p, "="); ok && sensitiveParam(k) {
				params[j] = k + "=" + Redacted
			}
		}
		head += "?" + strings.Join(params, "&")
	}
	if hasFrag {
		head += "#" + frag
	}
	return head
}

// sensitiveParam reports whether a query parameter named k may carry a
// secret.
func sensitiveParam(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"sig", "key", "secret", "token", "password", "passwd", "credential", "sas", "auth", "connection"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// redactError returns err, reading with every occurrence of the secrets of
// basePath (its user information, its sensitive query values) redacted as
// by [RedactURL]; it still matches what err matches.
func redactError(basePath string, err error) error {
	if err == nil {
		return nil
	}
	shown := RedactURL(basePath)
	if shown == basePath {
		return err
	}
	return &redactedError{err: err, msg: strings.ReplaceAll(err.Error(), basePath, shown)}
}

// RedactError returns err with the secrets that any URL in its text
// carries redacted as by [RedactURL] (user information, query values such
// as an Azure SAS signature); it still matches what err matches with
// errors.Is and errors.As. The URL of a *url.Error in err's chain is
// redacted in place. A nil err stays nil.
func RedactError(err error) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = RedactURL(ue.URL) // for callers that look at it
	}
	msg := err.Error()
	fields := strings.FieldsFunc(msg, func(r rune) bool { return r == ' ' || r == '"' || r == '\'' || r == '\n' || r == '\t' })
	out := msg
	for _, f := range fields {
		if strings.Contains(f, "://") {
			if r := RedactURL(f); r != f {
				out = strings.ReplaceAll(out, f, r)
			}
		}
	}
	if out == msg {
		return err
	}
	return &redactedError{err: err, msg: out}
}

// redactedError reads as msg and wraps err.
type redactedError struct {
	err error
	msg string
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
