package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// chromiumEnv names the Chromium executable the browser test drives;
// make test installs Debian's and sets it.
const chromiumEnv = "DSTL_CHROMIUM"

// TestBrowserCharts draws the charts of a fixture report, serves them on
// 127.0.0.1 and loads index.html in headless Chromium: the title must be
// the report's, every chart the index references must be loaded and drawn
// (an image of some width), and the console must stay free of errors. A
// missing chart must be found.
func TestBrowserCharts(t *testing.T) {
	exe := os.Getenv(chromiumEnv)
	if exe == "" {
		t.Skipf("%s is not set: the browser test needs Chromium (make test installs Debian's and sets %s=/usr/bin/chromium)", chromiumEnv, chromiumEnv)
	}
	if _, err := os.Stat(exe); err != nil {
		t.Fatalf("%s=%s: %v", chromiumEnv, exe, err)
	}
	data, err := os.ReadFile(chartFixture)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := decodeBenchRuns(data)
	if err != nil {
		t.Fatal(err)
	}
	// Nothing of Chromium's may be left in the system's temporary
	// directory (other processes' files may come and go there: only
	// Chromium's are compared).
	before := chromiumTemps(t)
	defer func() {
		for _, name := range chromiumTemps(t) {
			if !slices.Contains(before, name) {
				t.Errorf("chromium left %s behind", name)
			}
		}
	}()
	for _, tc := range []struct {
		name    string
		remove  string // a chart deleted after drawing
		problem string // what the check must say then
	}{
		{name: "every chart"},
		{name: "a chart missing", remove: "c-batching.svg", problem: "c-batching.svg: not drawn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "report.json")
			if err := os.WriteFile(in, data, 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(dir, "charts")
			charts, err := writeBenchCharts(runs, in, out)
			if err != nil {
				t.Fatal(err)
			}
			if len(charts) != len(chartFiles) {
				t.Fatalf("%d charts drawn, want %d", len(charts), len(chartFiles))
			}
			if tc.remove != "" {
				if err := os.Remove(filepath.Join(out, tc.remove)); err != nil {
					t.Fatal(err)
				}
			}
			srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
			defer srv.Close()
			title, problems, err := checkInBrowser(t, exe, srv.URL+"/charts/index.html", charts)
			if err != nil {
				t.Fatal(err)
			}
			if want := "dstl bench, " + runs[0].Report.Start.Format("2006-01-02"); title != want {
				t.Errorf("title %q, want %q", title, want)
			}
			switch {
			case tc.problem == "" && len(problems) > 0:
				t.Errorf("problems:\n%s", strings.Join(problems, "\n"))
			case tc.problem != "" && !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.problem) }):
				t.Errorf("problems %q do not include %q", problems, tc.problem)
			case tc.problem != "" && !slices.ContainsFunc(problems, func(p string) bool { return strings.HasPrefix(p, "console") }):
				t.Errorf("problems %q include no console error for the missing chart", problems)
			}
		})
	}
}

// chromiumTemps lists Chromium's temporary directories and files in the
// system's temporary directory.
func chromiumTemps(t *testing.T) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(os.TempDir(), "org.chromium.Chromium.*"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join(os.TempDir(), ".org.chromium.Chromium.*"))
	if err != nil {
		t.Fatal(err)
	}
	return append(names, more...)
}

// pageImage is what the page says of one of its images.
type pageImage struct {
	Src      string  `json:"src"`
	Complete bool    `json:"complete"`
	Width    float64 `json:"width"`
	Height   float64 `json:"height"`
}

// checkInBrowser loads url in a new headless Chromium and returns the
// page's title and what is wrong: a chart the index should show that is
// not an image of the page, an image not drawn (not loaded, or no
// width), and each console error or exception.
func checkInBrowser(t *testing.T, exe, url string, charts []benchChart) (string, []string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tmp := t.TempDir()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		// The profile in the test's directory, removed with it; Chromium
		// removes its own temporary files (org.chromium.Chromium.* in the
		// system's temporary directory) when it is closed gracefully,
		// below. (Pointing its TMPDIR elsewhere made it fail to start now
		// and then on a loaded machine.)
		chromedp.UserDataDir(tmp),
	}
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	var mu sync.Mutex
	var problems []string
	listen := func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.ConsoleAPICalledTypeError {
				var args []string
				for _, a := range ev.Args {
					args = append(args, string(a.Value))
				}
				problems = append(problems, "console error: "+strings.Join(args, " "))
			}
		case *runtime.EventExceptionThrown:
			problems = append(problems, fmt.Sprintf("console exception: %s (%s:%d)", ev.ExceptionDetails.Text, ev.ExceptionDetails.URL, ev.ExceptionDetails.LineNumber))
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				problems = append(problems, fmt.Sprintf("console error: %s (%s)", ev.Entry.Text, ev.Entry.URL))
			}
		}
	}
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithListener(listen))
	defer bcancel()
	// Close the browser gracefully (it removes its files then), before
	// the allocator's context kills what is left.
	defer func() {
		if err := chromedp.Cancel(bctx); err != nil {
			t.Logf("closing chromium: %v", err)
		}
	}()

	if _, err := chromedp.Call(bctx, cdplog.Enable, cdp.Empty{}); err != nil {
		return "", nil, fmt.Errorf("chromium %s: %w", exe, err)
	}
	if _, err := chromedp.Call(bctx, runtime.Enable, cdp.Empty{}); err != nil {
		return "", nil, fmt.Errorf("chromium %s: %w", exe, err)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(url), chromedp.WaitReady("body")); err != nil {
		return "", nil, fmt.Errorf("chromium %s: %w", exe, err)
	}
	title, err := chromedp.Run(bctx, chromedp.Title())
	if err != nil {
		return "", nil, fmt.Errorf("chromium %s: %w", exe, err)
	}
	images, err := chromedp.Run(bctx, chromedp.Evaluate[[]pageImage](`Array.from(document.images).map(i => ({src: i.getAttribute("src"), complete: i.complete, width: i.naturalWidth, height: i.naturalHeight}))`))
	if err != nil {
		return "", nil, fmt.Errorf("chromium %s: %w", exe, err)
	}
	// Log entries may trail the load by a moment.
	_ = chromedp.Do(bctx, chromedp.Sleep(200*time.Millisecond))
	mu.Lock()
	defer mu.Unlock()
	for _, c := range charts {
		i := slices.IndexFunc(images, func(im pageImage) bool { return im.Src == c.File })
		switch {
		case i < 0:
			problems = append(problems, c.File+": not an image of the page")
		case !images[i].Complete || images[i].Width <= 0 || images[i].Height <= 0:
			problems = append(problems, fmt.Sprintf("%s: not drawn (complete %v, %gx%g)", c.File, images[i].Complete, images[i].Width, images[i].Height))
		}
	}
	if len(images) != len(charts) {
		problems = append(problems, fmt.Sprintf("%d images on the page, want %d", len(images), len(charts)))
	}
	return title, slices.Clone(problems), nil
}
