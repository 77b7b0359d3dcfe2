package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"

	"github.com/dstlgo/dstl/internal/errchain"
)

// printFailure writes err to w as failureLines does, each line after
// prefix (such as "dstl gc: ").
func printFailure(w io.Writer, prefix string, err error) {
	for _, line := range failureLines(err) {
		fmt.Fprintf(w, "%s%s\n", prefix, line)
	}
}

// reporter writes a command's failures to w, each after the command's
// name (such as "dstl gc"), and returns the code the command exits with.
type reporter struct {
	w       io.Writer
	command string
}

// fail writes the message of format and args and returns code.
func (r reporter) fail(code int, format string, args ...any) int {
	fmt.Fprintf(r.w, r.command+": "+format+"\n", args...)
	return code
}

// usage writes the message of format and args and returns exitUsage.
func (r reporter) usage(format string, args ...any) int {
	return r.fail(exitUsage, format, args...)
}

// err writes err as printFailure does and returns code.
func (r reporter) err(code int, err error) int {
	printFailure(r.w, r.command+": ", err)
	return code
}

// failureLines returns the lines that report err: one per distinct
// failure. The parts of a joined error (errors.Join, here or in an error
// it wraps) are failures of their own; parts of the same cause (a network
// error, such as a refused connection) are one failure, reported by the
// first. A line starts with its network cause, or the credentials that
// a cloud SDK did not find or was refused, when it has one, the
// context after it in parentheses; the package prefix "dstl: ", which the
// command's own prefix makes redundant, is left out.
func failureLines(err error) []string {
	type group struct {
		line    string
		n       int  // failures
		byCause bool // of one network cause, else of one line
	}
	var groups []*group
	byKey := map[string]*group{}
	for _, f := range splitFailures(err) {
		line, cause := causeFirst(f.text, f.err)
		line = dropPrefix(line)
		key := cause
		if key == "" {
			key = line
		}
		if g := byKey[key]; g != nil {
			g.n++
			continue
		}
		g := &group{line: line, n: 1, byCause: cause != ""}
		byKey[key] = g
		groups = append(groups, g)
	}
	lines := make([]string, len(groups))
	for i, g := range groups {
		lines[i] = g.line
		switch {
		case g.n > 1 && g.byCause:
			lines[i] += fmt.Sprintf(", and %d more %s of this cause", g.n-1, plural(g.n-1, "failure"))
		case g.n > 1:
			lines[i] += fmt.Sprintf(", and %d more like it", g.n-1)
		}
	}
	return lines
}

// failure is one failure of an error: its message, on one line, and the
// error it is about.
type failure struct {
	text string
	err  error
}

// splitFailures splits err into its failures: the parts of the joined
// errors in it, each with the messages of the errors that wrap it around
// its own.
func splitFailures(err error) []failure {
	msg := err.Error()
	if !strings.Contains(msg, "\n") {
		return []failure{{msg, err}}
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		var parts []error
		var msgs []string
		for _, c := range u.Unwrap() {
			if c != nil {
				parts, msgs = append(parts, c), append(msgs, c.Error())
			}
		}
		if msg == strings.Join(msgs, "\n") { // errors.Join
			var out []failure
			for _, c := range parts {
				out = append(out, splitFailures(c)...)
			}
			return out
		}
		for _, c := range parts {
			if inner := c.Error(); strings.Contains(inner, "\n") && strings.Count(msg, inner) == 1 {
				return around(msg, inner, splitFailures(c))
			}
		}
	case interface{ Unwrap() error }:
		if c := u.Unwrap(); c != nil && strings.Count(msg, c.Error()) == 1 {
			return around(msg, c.Error(), splitFailures(c))
		}
	}
	var out []failure
	for _, line := range strings.Split(msg, "\n") {
		out = append(out, failure{line, err})
	}
	return out
}

// around puts what msg holds around inner, the message of the error whose
// failures are fs, around each failure's text.
func around(msg, inner string, fs []failure) []failure {
	i := strings.Index(msg, inner)
	before, after := msg[:i], msg[i+len(inner):]
	for k := range fs {
		fs[k].text = before + fs[k].text + after
	}
	return fs
}

// causeFirst moves the network cause of err, whose message is text, to
// the front: "dial tcp ...: connection refused (the context)". It returns
// the line and the cause; without a network cause, text as it is and "".
func causeFirst(text string, err error) (string, string) {
	var cause, whole string // whole: the text the cause takes in text
	var ue *url.Error
	var oe *net.OpError
	var de *net.DNSError
	switch {
	case errors.As(err, &ue) && ue.Err != nil && !errors.Is(ue.Err, context.Canceled) && !errors.Is(ue.Err, context.DeadlineExceeded):
		// Without "Get URL": the context names the object. A request ended
		// by its context has its cause in the context: a deadline that the
		// message before says.
		cause, whole = ue.Err.Error(), ue.Error()
	case errors.As(err, &oe):
		cause, whole = oe.Error(), oe.Error()
	case errors.As(err, &de):
		cause, whole = de.Error(), de.Error()
	default:
		if cause, whole = credentialCause(text, err); cause == "" {
			return text, ""
		}
	}
	i := strings.Index(text, whole)
	if i < 0 {
		return text, ""
	}
	context := strings.TrimRight(strings.TrimSpace(text[:i]), ":,") + text[i+len(whole):]
	if context == "" {
		return cause, cause
	}
	return cause + " (" + context + ")", cause
}

// credentialMarks are the starts of the messages with which the cloud
// SDKs say that they found no credentials (or were refused the ones they
// found), each with the cause's words for it: the AWS SDK's "get
// identity: " (of an operation) and "get credentials: " (of its
// credentials' adapter), Google's Application Default Credentials' "could
// not find default credentials" and the azure backend's own words for
// azidentity's failures.
var credentialMarks = []struct{ mark, cause string }{
	{"get identity: get credentials: ", "no credentials for s3: "},
	{"get identity: ", "no credentials for s3: "},
	{"credentials: could not find default credentials", "no credentials for gcs: could not find default credentials"},
	{"missing or refused Azure credentials", "missing or refused Azure credentials"},
}

// credentialCause returns the credential failure in err, whose message is
// text, as the cause that causeFirst puts first ("no credentials for s3:
// ...") and the text the failure takes in text; "" and "" when err is of
// no credential failure. The failure takes the error in err's chain whose
// message starts with a mark, or else text from the mark to its end.
func credentialCause(text string, err error) (cause, whole string) {
	for _, m := range credentialMarks {
		i := strings.Index(text, m.mark)
		if i < 0 {
			continue
		}
		whole = text[i:]
		for e := range errchain.All(err) {
			if msg := e.Error(); strings.HasPrefix(msg, m.mark) && strings.Contains(text, msg) {
				whole = msg
				break
			}
		}
		return m.cause + strings.TrimPrefix(whole, m.mark), whole
	}
	return "", ""
}

// dropPrefix removes the package prefix "dstl: " from the start of line
// and after each ": " or "(" in it.
func dropPrefix(line string) string {
	line = strings.TrimPrefix(line, "dstl: ")
	line = strings.ReplaceAll(line, ": dstl: ", ": ")
	return strings.ReplaceAll(line, "(dstl: ", "(")
}
