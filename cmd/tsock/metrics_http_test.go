package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/tsock/tsock/fs/fusetest"
)

// TestMetricsOverHTTP: --metrics-listen serves the metrics file's text
// (Prometheus text format, its content type) and status.json over HTTP;
// an address that is taken fails the mount with exit 1, naming the flag,
// and leaves no mount.
func TestMetricsOverHTTP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	d := startDaemon(t, "--source", "synthetic:40", "--batch-size", "8", "--image-size", "8", "--metrics-listen", addr)
	get := func(path string) (string, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s, %v", path, resp.Status, err)
		}
		return string(body), resp.Header.Get("Content-Type")
	}
	metrics, kind := get("/metrics")
	if !strings.HasPrefix(kind, "text/plain; version=0.0.4") || !strings.Contains(metrics, "# TYPE tsock_producer_epoch gauge\ntsock_producer_epoch ") {
		t.Fatalf("/metrics (%s):\n%s", kind, metrics)
	}
	text, _ := get("/status.json")
	var doc statusDoc
	if err := json.Unmarshal([]byte(text), &doc); err != nil || doc.Version != statusVersion || doc.Mode != "pipeline" {
		t.Fatalf("/status.json: %+v, %v", doc, err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	mp := t.TempDir()
	code, out := runCLI(t, "mount", mp, "--source", "synthetic:40", "--metrics-listen", taken.Addr().String())
	if code != exitError || !strings.Contains(out, "--metrics-listen") {
		t.Fatalf("a taken address: exit %d, %q", code, out)
	}
	if fusetest.Mounted(t, mp) {
		t.Fatal("a failed mount left a mount behind")
	}
	d.stop(t)
	if _, err := http.Get("http://" + addr + "/metrics"); err == nil {
		t.Fatal("the metrics server outlived the mount")
	}
}
