// Package s3test runs a real S3 server (versitygw's gateway and POSIX
// backend, built from ./versitygw by scripts/setup.sh) on loopback for
// tests, and a proxy that injects faults between tsock and
// it. No mock of the API: the server is the one users can run.
package s3test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// Credentials the server is started with; tests export them as the AWS
// environment variables.
const (
	AccessKey = "tsock-test-key"
	SecretKey = "tsock-test-secret-do-not-print"
)

// Binary is versitygw: $TSOCK_VERSITYGW, else where scripts/setup.sh
// builds it (./versitygw: the gateway with its POSIX backend alone),
// else versitygw's own command on PATH.
func Binary() (string, error) {
	if p := os.Getenv("TSOCK_VERSITYGW"); p != "" {
		return p, nil
	}
	if p := "/var/cache/tsock/gobin/versitygw-posix"; fileExists(p) {
		return p, nil
	}
	return exec.LookPath("versitygw")
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// Server is a running versitygw whose buckets are Root's directories.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	Root     string
}

// Start starts versitygw over a new temp dir holding buckets, and stops
// it at the test's end. Without the binary the test is skipped, which
// scripts/test.sh counts as a failure under CI.
func Start(t testing.TB, buckets ...string) *Server {
	t.Helper()
	bin, err := Binary()
	if err != nil {
		t.Skipf("SKIPPED: no versitygw (%v): scripts/setup.sh installs it", err)
	}
	root := t.TempDir()
	for _, b := range buckets {
		if err := os.Mkdir(filepath.Join(root, b), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	addr := freePort(t)
	cmd := exec.Command(bin, "--access", AccessKey, "--secret", SecretKey, "--port", addr, "posix", root)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("versitygw did not listen on %s in 30s", addr)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", SecretKey)
	t.Setenv("AWS_REGION", "us-east-1")
	return &Server{Endpoint: "http://" + addr, Root: root}
}

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Fault is what the proxy does to one request.
type Fault int

// The faults.
const (
	Pass         Fault = iota
	SlowDown           // 503 SlowDown, as S3 throttles
	Error500           // 500 InternalError
	Truncate           // the answer's body cut in half, then the connection closed
	Reset              // the connection closed before any answer
	Stall              // no answer until the client gives up (its timeout)
	AccessDenied       // 403 AccessDenied, as for revoked or expired credentials
	NoSuchKey          // 404 NoSuchKey, as for a deleted object
	Unavailable        // 503 ServiceUnavailable with Retry-After (RetryAfter seconds), as a store that is down
	IgnoreRange        // the Range header dropped: 200 and the whole object, as a server or gateway that ignores Range
	ShiftRange         // the Range asked from one byte later: 206 and a range that is not the one asked for
	Trickle            // the answer's body a byte every 0.3 s, as a connection that never quite stalls
	faults             // how many there are
)

// Proxy forwards to target, doing to request n (from 1) what fault says.
type Proxy struct {
	Endpoint string
	Faults   atomic.Uint64         // faults injected
	Injected [faults]atomic.Uint64 // by Fault
	// Delay, in nanoseconds, holds every answer back as a distant store
	// would, so that requests in flight overlap and can be counted.
	Delay atomic.Int64
	// Bandwidth, in bytes a second, caps what each answer's body gets,
	// as one connection to a distant store does; 0: no cap.
	Bandwidth atomic.Int64
	// rateLimit, in requests a second, is what the store serves before it
	// answers 503 SlowDown, as S3 does per prefix; 0: no limit (LimitRate).
	rateLimit atomic.Int64
	// RetryAfter, in seconds, is the Retry-After of Unavailable's answers.
	RetryAfter atomic.Int64
	// CutAfter, in bytes, breaks every answer's body after that many
	// bytes (the connection closed), as a link that resets; 0: never.
	CutAfter    atomic.Int64
	MaxInFlight atomic.Int64 // the most requests it held at once
	srv         *http.Server
	listener    net.Listener
	addr        string
	conns       sync.Map // the open connections, closed by Down
	down        atomic.Bool
	rate        struct {
		sync.Mutex
		second time.Time
		n      int64
	}
	inFlight atomic.Int64
	mu       sync.Mutex
	n        int
	log      []string // "n fault METHOD PATH RANGE", for a failing test to show
}

// Log is what the proxy saw: one line a request, in order.
func (p *Proxy) Log() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.log...)
}

// StartProxy starts a fault-injecting proxy to s on loopback.
func StartProxy(t testing.TB, s *Server, fault func(n int) Fault) *Proxy {
	t.Helper()
	target, _ := url.Parse(s.Endpoint)
	rp := httputil.NewSingleHostReverseProxy(target)
	p := &Proxy{}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.n++
		f := fault(p.n)
		if f == Pass && p.overRate() {
			f = SlowDown
		}
		p.log = append(p.log, fmt.Sprintf("%d fault=%d %s %s %s", p.n, f, r.Method, r.URL.RequestURI(), r.Header.Get("Range")))
		p.mu.Unlock()
		now := p.inFlight.Add(1)
		defer p.inFlight.Add(-1)
		for seen := p.MaxInFlight.Load(); now > seen && !p.MaxInFlight.CompareAndSwap(seen, now); seen = p.MaxInFlight.Load() {
		}
		if d := time.Duration(p.Delay.Load()); d > 0 {
			time.Sleep(d) // the link's latency, not a wait for an event
		}
		if f != Pass {
			p.Faults.Add(1)
		}
		p.Injected[f].Add(1)
		switch f {
		case SlowDown, Error500, AccessDenied, NoSuchKey, Unavailable:
			code, status := map[Fault]string{SlowDown: "SlowDown", Error500: "InternalError", AccessDenied: "AccessDenied", NoSuchKey: "NoSuchKey", Unavailable: "ServiceUnavailable"}[f],
				map[Fault]int{SlowDown: 503, Error500: 500, AccessDenied: 403, NoSuchKey: 404, Unavailable: 503}[f]
			if f == Unavailable && p.RetryAfter.Load() > 0 {
				w.Header().Set("Retry-After", fmt.Sprint(p.RetryAfter.Load()))
			}
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(status)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, code)
		case Stall:
			<-r.Context().Done() // the client's timeout closes the connection
		case Reset:
			if c, _, err := w.(http.Hijacker).Hijack(); err == nil {
				c.(*net.TCPConn).SetLinger(0)
				c.Close()
			}
		case Truncate:
			rec := &halfWriter{ResponseWriter: w}
			rp.ServeHTTP(rec, r)
		case Trickle:
			rp.ServeHTTP(&slowWriter{ResponseWriter: w, rate: 3}, r)
		case IgnoreRange, ShiftRange:
			// The request is signed, Range included: the server answers
			// it, and its answer is rewritten from the object's file.
			wrong := httputil.NewSingleHostReverseProxy(target)
			wrong.ModifyResponse = func(resp *http.Response) error { return s.misrange(resp, r.URL.Path, f == ShiftRange) }
			wrong.ServeHTTP(w, r)
		default:
			if bw := p.Bandwidth.Load(); bw > 0 {
				w = &slowWriter{ResponseWriter: w, rate: bw}
			}
			if cut := p.CutAfter.Load(); cut > 0 {
				w = &halfWriter{ResponseWriter: w, budget: cut, armed: true, fixed: true}
			}
			rp.ServeHTTP(w, r)
		}
	}), ConnState: func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			p.conns.Store(c, true)
		case http.StateClosed, http.StateHijacked:
			p.conns.Delete(c)
		}
	}}
	p.srv, p.listener, p.addr = srv, l, l.Addr().String()
	go srv.Serve(l)
	t.Cleanup(func() { p.down.Store(true); srv.Close() })
	p.Endpoint = "http://" + l.Addr().String()
	return p
}

// misrange rewrites a 206 to the object at path (/bucket/key): the
// whole object with 200 (shift false), or the range one byte later than
// the one answered, said in its Content-Range (shift true).
func (s *Server) misrange(resp *http.Response, path string, shift bool) error {
	if resp.StatusCode != http.StatusPartialContent {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(s.Root, filepath.FromSlash(strings.TrimPrefix(path, "/"))))
	if err != nil {
		return err
	}
	var from, to, total int64
	if _, err := fmt.Sscanf(resp.Header.Get("Content-Range"), "bytes %d-%d/%d", &from, &to, &total); err != nil {
		return err
	}
	body := data
	if shift {
		from, to = from+1, min(to+1, int64(len(data))-1)
		body = data[from : to+1]
		resp.Header.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", from, to, total))
	} else {
		resp.StatusCode, resp.Status = http.StatusOK, "200 OK"
		resp.Header.Del("Content-Range")
	}
	resp.Body.Close()
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Set("Content-Length", fmt.Sprint(len(body)))
	return nil
}

// Down closes the proxy's port and its connections: every connection is
// refused (ECONNREFUSED) until Up, as a store that is down.
func (p *Proxy) Down(t testing.TB) {
	t.Helper()
	p.down.Store(true)
	p.srv.SetKeepAlivesEnabled(false)
	if err := p.listener.Close(); err != nil {
		t.Fatal(err)
	}
	p.conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
}

// Up listens on the port again.
func (p *Proxy) Up(t testing.TB) {
	t.Helper()
	l, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("listening on %s again: %v", p.addr, err)
	}
	p.down.Store(false)
	p.listener = l
	p.srv.SetKeepAlivesEnabled(true)
	go p.srv.Serve(l)
}

// LimitRate has the store serve n requests a second (0: no limit), counted
// afresh: the requests of the second before (another phase of a test)
// are not held against the next ones.
func (p *Proxy) LimitRate(n int64) {
	p.rate.Lock()
	defer p.rate.Unlock()
	p.rate.second, p.rate.n = time.Time{}, 0
	p.rateLimit.Store(n)
}

// overRate counts a request against the rate limit in the current second.
func (p *Proxy) overRate() bool {
	limit := p.rateLimit.Load()
	if limit <= 0 {
		return false
	}
	p.rate.Lock()
	defer p.rate.Unlock()
	if now := time.Now(); now.Sub(p.rate.second) >= time.Second {
		p.rate.second, p.rate.n = now, 0
	}
	p.rate.n++
	return p.rate.n > limit
}

// slowWriter writes a body at rate bytes a second: the link's bandwidth.
type slowWriter struct {
	http.ResponseWriter
	rate int64
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (s *slowWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *slowWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), max(int(s.rate/100), 1))] // 10 ms of the link at a time
		n, err := s.ResponseWriter.Write(chunk)
		written += n
		if err != nil {
			return written, err
		}
		if err := http.NewResponseController(s.ResponseWriter).Flush(); err != nil { // on the wire now, as a link sends it
			return written, err
		}
		time.Sleep(time.Duration(int64(n) * int64(time.Second) / s.rate)) // the link's speed, not a wait for an event
		b = b[n:]
	}
	return written, nil
}

// halfWriter passes the headers and half the body, then breaks the
// connection: a body shorter than its Content-Length.
type halfWriter struct {
	http.ResponseWriter
	budget int64
	armed  bool
	fixed  bool // budget is set (CutAfter), not half the body
	broken bool
}

func (h *halfWriter) WriteHeader(code int) {
	if n := h.Header().Get("Content-Length"); n != "" && !h.fixed {
		var size int64
		fmt.Sscan(n, &size)
		h.budget, h.armed = size/2, true
	}
	h.ResponseWriter.WriteHeader(code)
}

func (h *halfWriter) Write(b []byte) (int, error) {
	if h.broken {
		return 0, io.ErrClosedPipe
	}
	if h.armed && int64(len(b)) > h.budget {
		h.ResponseWriter.Write(b[:h.budget])
		h.ResponseWriter.(http.Flusher).Flush()
		if c, _, err := h.ResponseWriter.(http.Hijacker).Hijack(); err == nil {
			c.Close()
		}
		h.broken = true
		return 0, io.ErrClosedPipe
	}
	h.budget -= int64(len(b))
	return h.ResponseWriter.Write(b)
}

// Put uploads the file at path as bucket/key with a real PUT, so that the
// server gives it an ETag as it would any upload.
func (s *Server) Put(t testing.TB, bucket, key, path string) {
	t.Helper()
	u, _ := url.Parse(s.Endpoint)
	client, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.FPutObject(context.Background(), bucket, key, path, minio.PutObjectOptions{}); err != nil {
		t.Fatalf("put s3://%s/%s: %v", bucket, key, err)
	}
}

// Empty deletes every object of bucket through the S3 API, as a user
// emptying a bucket would.
func (s *Server) Empty(t testing.TB, bucket string) {
	t.Helper()
	u, _ := url.Parse(s.Endpoint)
	client, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(AccessKey, SecretKey, ""), Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for obj := range client.ListObjects(ctx, bucket, minio.ListObjectsOptions{Recursive: true}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		if err := client.RemoveObject(ctx, bucket, obj.Key, minio.RemoveObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
