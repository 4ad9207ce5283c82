package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net/http"
	"regexp"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed web
var webFS embed.FS

// Handler returns the demo's HTTP API and dashboard.
func (a *App) Handler() http.Handler {
	mux := http.NewServeMux()
	static, err := iofs.Sub(webFS, "web")
	if err != nil {
		panic(err)
	}
	files := http.FileServerFS(static)
	mux.Handle("GET /", noCache(files))
	con, err := a.consoleHandler()
	if err != nil {
		panic(err) // only a nil Reader fails, and the App always has one
	}
	// One pattern per method: "/console/" alone would conflict with "GET /".
	mux.Handle("GET /console/", con)
	mux.Handle("POST /console/", con)

	// seed 003's task surface
	mux.HandleFunc("POST /enqueue", a.handleEnqueue)
	mux.HandleFunc("GET /enqueue", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Allow", "POST")
		writeError(w, http.StatusMethodNotAllowed, "POST a JSON task: {\"id\",\"payload\",\"max_retries\"}")
	})
	mux.HandleFunc("GET /healthz", a.handleHealthz)
	mux.HandleFunc("GET /tasks/{id}", a.handleTask)

	mux.Handle("GET /metrics", promhttp.HandlerFor(a.reg, promhttp.HandlerOpts{Registry: a.reg}))

	// the dashboard's data
	mux.HandleFunc("GET /api/v1/stats", a.handleStats)
	mux.HandleFunc("GET /api/v1/segments", a.handleSegments)
	mux.HandleFunc("GET /api/v1/status", a.handleStatus)
	mux.HandleFunc("GET /api/v1/ping", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"message": "pong"})
	})

	// scenario control, as in github.com/koykov/demo/queue (which uses GET;
	// both methods are accepted, the key parameter is ignored)
	for _, m := range []string{"GET", "POST"} {
		mux.HandleFunc(m+" /api/v1/producer-up", a.handleProducers(+1))
		mux.HandleFunc(m+" /api/v1/producer-down", a.handleProducers(-1))
		mux.HandleFunc(m+" /api/v1/stop", a.handleStop(false))
		mux.HandleFunc(m+" /api/v1/force-stop", a.handleStop(true))
	}
	mux.HandleFunc("POST /api/v1/init", a.handleInit)
	mux.HandleFunc("POST /api/v1/restore", a.handleRestore)
	mux.HandleFunc("POST /api/v1/flush", a.handleFlush)
	return mux
}

func noCache(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, args...)})
}

// enqueueRequest is the body of POST /enqueue (seed 003).
type enqueueRequest struct {
	ID         *string         `json:"id"`
	Payload    json.RawMessage `json:"payload"`
	MaxRetries *int            `json:"max_retries"`
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

const maxBody = 1 << 20

// handleEnqueue: 202 {"id"} accepted (queued, or dumped when the queue was
// full); 400 bad JSON or fields; 409 duplicate id; 503 the queue refused it
// (no scene, closed, or the dump refused the leak).
func (a *App) handleEnqueue(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, http.StatusRequestEntityTooLarge, "body larger than %d bytes", maxBody)
			return
		}
		writeError(w, http.StatusBadRequest, "read body: %v", err)
		return
	}
	var req enqueueRequest
	if err := decodeStrict(body, &req); err != nil {
		writeError(w, http.StatusBadRequest, "bad JSON: %v", err)
		return
	}
	switch {
	case req.ID == nil:
		writeError(w, http.StatusBadRequest, "id: required")
		return
	case !idPattern.MatchString(*req.ID):
		writeError(w, http.StatusBadRequest, "id: %q: want 1-128 characters of A-Z a-z 0-9 . _ : - (not starting with a symbol)", *req.ID)
		return
	case req.MaxRetries != nil && (*req.MaxRetries < 0 || *req.MaxRetries > 100):
		writeError(w, http.StatusBadRequest, "max_retries: %d is outside 0..100", *req.MaxRetries)
		return
	}
	payload := ""
	if len(req.Payload) > 0 && string(req.Payload) != "null" {
		if req.Payload[0] == '"' {
			if err := json.Unmarshal(req.Payload, &payload); err != nil {
				writeError(w, http.StatusBadRequest, "payload: %v", err)
				return
			}
		} else {
			payload = string(req.Payload) // any other JSON value, as its text
		}
	}
	s := a.current()
	if s == nil {
		writeError(w, http.StatusServiceUnavailable, "no scene is running (POST /api/v1/init)")
		return
	}
	retries := s.cfg.MaxRetries
	if req.MaxRetries != nil {
		retries = *req.MaxRetries
	}
	t := newTask(*req.ID, payload, retries)
	t.api = true
	if err := a.store.add(t); err != nil {
		writeError(w, http.StatusConflict, "id %q already exists", *req.ID)
		return
	}
	if err := s.submit(t, stQueued, ""); err != nil {
		a.store.remove(t)
		a.c.refused.Add(1)
		writeError(w, http.StatusServiceUnavailable, "queue refused the task: %v", err)
		return
	}
	a.c.produced.Add(1)
	writeJSON(w, http.StatusAccepted, map[string]string{"id": t.ID, "status": t.status().String()})
}

// decodeStrict decodes one JSON value with no unknown fields and nothing after it.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

func (a *App) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	st := "idle"
	if a.current() != nil {
		st = "running"
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "scene": st})
}

func (a *App) handleTask(w http.ResponseWriter, r *http.Request) {
	t := a.store.get(r.PathValue("id"))
	if t == nil {
		writeError(w, http.StatusNotFound, "no task %q (finished producer tasks are forgotten after a while)", r.PathValue("id"))
		return
	}
	writeJSON(w, http.StatusOK, t.view())
}

// statsResponse is GET /api/v1/stats: the latest sample, the samples after
// ?since= (Unix ms), the totals and the state of the current scene.
type statsResponse struct {
	Now       int64            `json:"now"`
	Running   bool             `json:"running"`
	Sink      string           `json:"sink"`
	Config    SceneConfig      `json:"config"`
	Last      *sample          `json:"last"`
	Samples   []sample         `json:"samples"`
	Tasks     map[string]int64 `json:"tasks"`
	Reasons   map[string]int64 `json:"dead_letters"`
	Counters  map[string]int64 `json:"counters"`
	Restore   *restoreResult   `json:"restore,omitempty"`
	LastError string           `json:"last_error,omitempty"`
}

func (a *App) handleStats(w http.ResponseWriter, r *http.Request) {
	since, _ := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
	resp := statsResponse{Now: time.Now().UnixMilli(), Sink: a.sink.desc, Last: a.hist.last(), Tasks: a.store.stateCounts(),
		Reasons: map[string]int64{}, Restore: a.lastRest.Load()}
	for _, smp := range a.hist.all() {
		if smp.T > since {
			resp.Samples = append(resp.Samples, smp)
		}
	}
	for i, reason := range reasons {
		resp.Reasons[reason] = int64(a.c.leaked[i].Load())
	}
	t := a.totals()
	resp.Counters = map[string]int64{
		"produced": int64(a.c.produced.Load()), "processed": int64(a.c.processed.Load()),
		"failures": int64(a.c.failures.Load()), "retries": int64(a.c.retries.Load()),
		"refused": int64(a.c.refused.Load()), "lost": int64(a.c.dumpLost.Load()),
		"leaked": int64(a.c.leakedTotal()), "dumped": int64(t.Dumped), "restored": int64(t.Restored),
		"quarantined": int64(t.Quarantined), "segments_published": int64(t.Segments),
		"restore_retries": int64(t.Retried), "adopted": int64(a.store.adopted.Load()),
	}
	a.mu.Lock()
	resp.Config = a.cfg
	s := a.scene
	a.mu.Unlock()
	if s != nil {
		resp.Running = true
		if e := s.dump.Stats().LastError; e != nil {
			resp.LastError = "dump: " + e.Error()
		} else if e := s.rst.Stats().LastError; e != nil {
			resp.LastError = "restore: " + e.Error()
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (a *App) handleSegments(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	if err != nil || n <= 0 || n > 100 {
		n = 10
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	rows, err := a.segs.list(ctx, n)
	if err != nil {
		writeError(w, http.StatusBadGateway, "list segments: %v", err)
		return
	}
	if rows == nil {
		rows = []segmentRow{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"sink": a.sink.desc, "segments": rows})
}

func (a *App) handleStatus(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	cfg, s := a.cfg, a.scene
	a.mu.Unlock()
	out := map[string]any{"running": s != nil, "config": cfg, "sink": a.sink.desc}
	if s != nil {
		out["queue"] = map[string]any{
			"size": s.q.Size(), "capacity": s.q.Capacity(), "rate": s.q.Rate(),
			"workers_busy": s.busy.Load(), "retries_waiting": s.retries.len(),
			"puts": s.qm.puts.Load(), "pulls": s.qm.pulls.Load(), "leaks": s.qm.leaks.Load(),
			"deadline_drops": s.qm.deadline.Load(), "lost_by_queue": s.qm.lost.Load(),
		}
		out["producers"] = map[string]any{"active": s.prodUp.Load(), "max": len(s.producers)}
		ds, rs := s.dump.Stats(), s.rst.Stats()
		out["dump"] = map[string]any{"records": ds.Records, "segments": ds.Segments, "pending_bytes": ds.Pending, "rate": s.dump.Rate()}
		out["restorer"] = map[string]any{"ready": rs.Ready, "claimed": rs.Claimed, "quarantined_segments": rs.Quarantined,
			"restored": rs.Restored, "retried": rs.Retried, "quarantined_records": rs.QuarantinedRecords,
			"oldest_ready": rs.OldestReady.String()}
		out["started"] = s.started
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *App) handleInit(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "read body: %v", err)
		return
	}
	if a.current() != nil {
		writeError(w, http.StatusConflict, "%v", errRunning)
		return
	}
	cfg := a.opts.Scene
	if len(body) > 0 {
		if cfg, err = decodeSceneConfig(body, a.opts.Scene); err != nil {
			writeError(w, http.StatusBadRequest, "config: %v", err)
			return
		}
	}
	if _, err := a.StartScene(cfg); err != nil {
		code := http.StatusBadRequest
		if errors.Is(err, errRunning) {
			code = http.StatusConflict
		}
		writeError(w, code, "init: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"message": "success", "config": cfg})
}

func (a *App) handleProducers(sign int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		delta := 1
		if d := r.FormValue("delta"); d != "" {
			n, err := strconv.Atoi(d)
			if err != nil || n < 1 || n > 1024 {
				writeError(w, http.StatusBadRequest, "delta: %q: want 1..1024", d)
				return
			}
			delta = n
		}
		s := a.current()
		if s == nil {
			writeError(w, http.StatusConflict, "%v", errNoScene)
			return
		}
		a.stopWaves("producers set by hand")
		n, err := s.addProducers(sign * delta)
		if err != nil {
			writeJSON(w, http.StatusConflict, map[string]any{"error": err.Error(), "producers": n})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"message": "success", "producers": n})
	}
}

func (a *App) handleStop(force bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.current() == nil {
			writeError(w, http.StatusConflict, "%v", errNoScene)
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
		defer cancel()
		err := a.StopScene(ctx, force)
		led := a.ledger()
		out := map[string]any{"message": "success", "segments": a.sink.where(ctx), "tasks": led}
		if lerr := led.check(); lerr != nil {
			err = errors.Join(err, lerr)
		}
		if err != nil {
			out["message"] = "stopped with errors"
			out["error"] = err.Error()
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func (a *App) handleRestore(w http.ResponseWriter, _ *http.Request) {
	res, err := a.Restore()
	if err != nil {
		code := http.StatusConflict
		writeJSON(w, code, map[string]any{"error": err.Error(), "restore": res})
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

func (a *App) handleFlush(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 10*time.Second)
	defer cancel()
	if err := a.Flush(ctx); err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, errNoScene) {
			code = http.StatusConflict
		}
		writeError(w, code, "flush: %v", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"message": "flushed"})
}
