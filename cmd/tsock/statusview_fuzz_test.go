package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// FuzzStatusView: whatever status.json says (a program's file, read by
// another program), the view draws it without panicking, in lines that
// fit the terminal; and the text (MOUNTPOINT/status) renders it without
// panicking.
func FuzzStatusView(f *testing.F) {
	f.Add([]byte(`{"version":1,"producer":{"epoch_len":10,"epoch_done":-5,"rate_history":[-1,0,3]},"buffer":{"limit":-1,"used":-7},` +
		`"consumers":[{"name":"x","epoch_len":3,"epoch_done":9,"wait_share":-2,"lag_batches":18446744073709551615}],"gpu":{"slabs":-1,"nvml":true}}`))
	f.Add([]byte(`{"version":1,"ingest":{"last_write_seconds":-1e300},"unwatched_seconds":1e300,"idle_exit_seconds":-3,"transform":{},"shards":{"alone":"x","labels":"\u0000"},"rescan":{"last_added":1,"last_added_seconds":1e308}}`))
	f.Add([]byte(`{"version":1,"uptime_seconds":1e300,"consumers":[]}`))
	f.Add([]byte(`{"version":1,"source":"\u001b[2J\u2028\u00e9\ufffd\u0085","state_text":"a\nb","consumers":[{"name":"` + strings.Repeat("é", 40) + `","gpu_memory":-1}],"gpu":{}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var doc statusDoc
		if json.Unmarshal(data, &doc) != nil {
			return
		}
		statusText(doc)
		view := renderStatus(doc, "/mnt/tsock", time.Unix(0, 0))
		for _, line := range strings.Split(view, "\n") {
			if n := utf8.RuneCountInString(line); n > viewWidth {
				t.Fatalf("a line of %d columns: %q", n, line)
			}
			if strings.ContainsFunc(line, unicode.IsControl) {
				t.Fatalf("a control character reaches the terminal: %q", line)
			}
		}
	})
}
