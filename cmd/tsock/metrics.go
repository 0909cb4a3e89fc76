package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// metrics renders MOUNTPOINT/metrics in the Prometheus text format: the
// numbers of status, one series per consumer, for tools to scrape.
func (c *mountCommand) metrics() ([]byte, error) { return []byte(metricsText(c.snapshot())), nil }

// metricsText is a snapshot in the Prometheus text format.
func metricsText(s *mountSnapshot) string {
	snap := s.store
	var b strings.Builder
	gauge := func(name, help string, v float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s gauge\n%s %g\n", name, help, name, name, v)
	}
	counter := func(name, help string, v float64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n%s %g\n", name, help, name, name, v)
	}
	gauge("tsock_buffer_limit_bytes", "Memory allowed for batches (--buffer).", float64(snap.Limit))
	gauge("tsock_buffer_used_bytes", "Memory held by published batches.", float64(snap.Used))
	gauge("tsock_buffer_batches", "Batches held in memory.", float64(snap.Held))
	if snap.Lingering >= 0 {
		gauge("tsock_buffer_mapped_after_release_bytes", "Memory of batches already released that readers still map (part of the buffer).", float64(snap.Lingering))
	}
	counter("tsock_batches_published_total", "Batches published.", float64(snap.Published))
	counter("tsock_samples_published_total", "Samples published.", float64(snap.SamplesPublished))
	counter("tsock_producer_wait_seconds_total", "Time the producer waited for room in the buffer.", snap.ProducerWait.Seconds())
	if s.ingest != nil {
		counter("tsock_ingest_refused_total", "Ingested batches refused at close.", float64(s.ingest.Refused))
	}
	gauge("tsock_producer_epoch", "Producer epoch being made.", float64(s.epoch))
	if cs := s.cache; cs != nil {
		gauge("tsock_cache_bytes", "Encoded files held by the raw cache (--cache).", float64(cs.Used))
		counter("tsock_cache_hits_total", "Source reads answered from the raw cache.", float64(cs.Hits))
		counter("tsock_cache_misses_total", "Source reads that went to the source (disk or network).", float64(cs.Misses))
		counter("tsock_cache_dropped_total", "Files not kept for a failed write to the disk cache.", float64(cs.Dropped))
	}
	if k := s.kept; k != nil {
		gauge("tsock_kept_bytes", "Made samples kept for later epochs (--keep).", float64(k.Used))
		counter("tsock_kept_served_total", "Samples copied from the kept ones instead of decoded.", float64(k.Served))
	}
	if r := s.remote; r != nil {
		counter("tsock_remote_requests_total", "Requests to the object store, every attempt.", float64(r.requests))
		counter("tsock_remote_retries_total", "Object store requests tried again after a transient fault.", float64(r.retries))
		counter("tsock_remote_failures_total", "Object store requests that failed for good.", float64(r.failures))
		counter("tsock_remote_bytes_total", "Bytes read from the object store.", float64(r.bytes))
	}
	if g := s.gpu; g != nil {
		gauge("tsock_gpu_slabs", "GPU slabs allocated (--device).", float64(g.slabs))
		gauge("tsock_gpu_slabs_in_use", "GPU slabs holding a batch.", float64(g.inUse))
		gauge("tsock_gpu_slab_bytes", "Size of one GPU slab.", float64(g.slabSize))
	}
	gauge("tsock_skipped_inputs", "Distinct inputs skipped as unreadable or corrupt.", float64(s.skipped))
	perConsumer := []struct {
		name, kind, help string
		value            func(i int) float64
	}{
		{"tsock_consumer_position", "gauge", "The consumer's next batch number.", func(i int) float64 { return float64(snap.Consumers[i].Position) }},
		{"tsock_consumer_epoch", "gauge", "Epoch of the last batch consumed (-1 before any).", func(i int) float64 { return float64(snap.Consumers[i].Epoch) }},
		{"tsock_consumer_lag_batches", "gauge", "Published batches not yet consumed.", func(i int) float64 { return float64(snap.Consumers[i].Lag) }},
		{"tsock_consumer_lag_bytes", "gauge", "Bytes of published batches not yet consumed.", func(i int) float64 { return float64(snap.Consumers[i].LagBytes) }},
		{"tsock_consumer_batches_read_total", "counter", "Batches consumed.", func(i int) float64 { return float64(snap.Consumers[i].BatchesRead) }},
		{"tsock_consumer_samples_read_total", "counter", "Samples consumed.", func(i int) float64 { return float64(snap.Consumers[i].SamplesRead) }},
		{"tsock_consumer_bytes_read_total", "counter", "Bytes of batches consumed.", func(i int) float64 { return float64(snap.Consumers[i].BytesRead) }},
		{"tsock_consumer_open_batches", "gauge", "Batches the consumer holds open.", func(i int) float64 { return float64(snap.Consumers[i].OpenBatches) }},
		{"tsock_consumer_wait_seconds_total", "counter", "Time spent blocked waiting for a batch (exposed wait).", func(i int) float64 { return snap.Consumers[i].WaitTotal.Seconds() }},
		{"tsock_consumer_evicted", "gauge", "1 if the consumer was evicted.", func(i int) float64 { return bool01(snap.Consumers[i].Evicted != "") }},
		{"tsock_consumer_done", "gauge", "1 if the consumer read everything there will be.", func(i int) float64 { return bool01(snap.Consumers[i].Done) }},
	}
	for _, m := range perConsumer {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", m.name, m.help, m.name, m.kind)
		for i, cs := range snap.Consumers {
			fmt.Fprintf(&b, "%s{consumer=%q} %g\n", m.name, cs.Name, m.value(i))
		}
	}
	return b.String()
}

func bool01(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// metricsServer serves /metrics (and /status.json) over HTTP for
// --metrics-listen: Prometheus scrapes a port, not a file in a mount.
type metricsServer struct {
	listener net.Listener
	server   *http.Server
}

// listenMetrics binds addr at start, so that a taken port fails the
// mount before anything is mounted.
func (c *mountCommand) listenMetrics() error {
	if c.metricsListen == "" {
		return nil
	}
	l, err := net.Listen("tcp", c.metricsListen)
	if err != nil {
		return fmt.Errorf("--metrics-listen: %w", err)
	}
	mux := http.NewServeMux()
	serve := func(contentType string, render func() ([]byte, error)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			data, err := render()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Header().Set("Content-Type", contentType)
			w.Write(data)
		}
	}
	mux.Handle("GET /metrics", serve("text/plain; version=0.0.4; charset=utf-8", c.metrics))
	mux.Handle("GET /status.json", serve("application/json", c.statusJSON))
	c.metricsHTTP = &metricsServer{listener: l, server: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}}
	return nil
}

// run serves until ctx ends; it returns once the server has stopped.
func (m *metricsServer) run(ctx context.Context) {
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		m.server.Serve(m.listener) // returns at Close
	}()
	<-ctx.Done()
	m.server.Close()
	<-stopped
}
