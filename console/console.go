package console

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	iofs "io/fs"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/changelog"
	"github.com/dlqdump/dlqdump/internal/claims"
	"github.com/dlqdump/dlqdump/internal/inspect"
	"github.com/dlqdump/dlqdump/jobs"
	"github.com/dlqdump/dlqdump/segment"
	"github.com/dlqdump/dlqdump/selection"
	"github.com/dlqdump/dlqdump/sink"
)

//go:embed web
var webFS embed.FS

// Queue is what the console shows of a live dump Queue (*dlqdump.Queue).
type Queue interface {
	Stats() dlqdump.QueueStats
}

// Restorer is what the console shows of a live Restorer
// (*dlqdump.Restorer).
type Restorer interface {
	Stats() dlqdump.RestorerStats
}

// Options configure a console.
type Options struct {
	// Reader is the store shown: an fs.Reader, an s3.Reader. Required.
	Reader sink.Reader
	// Name labels the store on the page, e.g. a directory or an S3 URL.
	// Default "dump".
	Name string
	// Queue and Restorer, when set, add their counters and rates to the
	// overview. Default: none.
	Queue    Queue
	Restorer Restorer
	// Jobs is the store's restore jobs. Default: jobs.Open(Reader) when
	// the Reader keeps tables (fs and S3 do); none otherwise.
	Jobs *jobs.Store
	// ReadOnly refuses every change (403) and hides the controls.
	// Default false.
	ReadOnly bool
	// Keys unwraps the data keys of encrypted segments (an
	// *envelope.Keyring). Without it their records show metadata only.
	// Default nil.
	Keys segment.KeyUnwrapper
	// ProtoDescriptorSet and ProtoMessage show protobuf payloads of that
	// message as protojson: a FileDescriptorSet (protoc --include_imports
	// --descriptor_set_out=FILE) and a message's full name (or a short
	// name unique in the set). Default: none.
	ProtoDescriptorSet []byte
	ProtoMessage       string
	// Logger receives a line for every change made through the console,
	// and every request refused, with who asked. Default: discard.
	Logger *slog.Logger
	// Authorize says who is behind a request and what they may do (a
	// Role: viewer, operator or admin), e.g. from what the authentication
	// middleware in front of the console put into the request's context.
	// It is asked on every request: an error refuses it (401 when it
	// wraps ErrUnauthenticated, else 403), a viewer may look and change
	// nothing, and every change checks the role it needs. The change log
	// records the Principal's Name and Role. Default nil: everyone who
	// reaches the handler is an admin named by User, else by the client's
	// address (put the console behind your authentication).
	Authorize func(*http.Request) (Principal, error)
	// User, when set, names the person behind a request whose Principal
	// has no Name (or when Authorize is nil), e.g. from the
	// authentication middleware's context. Default: none (the client's
	// address).
	User func(*http.Request) string
	// ChangeLog is where changes made through the console are written
	// and the change log page reads. Default: changelog.Open(Reader) when
	// the Reader keeps tables (fs and S3 do); none otherwise.
	ChangeLog *changelog.Log
	// SearchBudget bounds the work of one search request: it returns what
	// it found so far, and where to go on, after this long. Default 1s.
	SearchBudget time.Duration
	// TrustedOrigins are origins, besides the page's own, allowed to POST
	// (e.g. "https://ops.example.com" behind a proxy that rewrites Host).
	// Default none.
	TrustedOrigins []string
}

// Handler serves the console. It is safe for concurrent use.
type Handler struct {
	o       Options
	rd      sink.Reader
	jobs    *jobs.Store
	log     *slog.Logger
	in      *inspect.Inspector
	walker  *inspect.Walker
	plans   *plans
	proto   *inspect.Proto
	token   string
	mux     http.Handler
	cop     *http.CrossOriginProtection
	cache   *summaryCache
	hist    *histograms
	changes *changelog.Log
	reasons *quarReasons
	scans   chan struct{} // one token per search running
	rates   *jobRates
	groups  *errGroups // the error groups page (errors.go)
	jobHist *jobHistory
	owner   string // in the claims of the console's own passes
}

// cacheSegments bounds the segments whose summaries and counts the console
// keeps (a few hundred bytes each): a store of more segments has some read
// again on each overview.
const cacheSegments = 50_000

// Errors of New.
var errNoReader = fmt.Errorf("%w: console: Options.Reader is required", dlqdump.ErrConfig)

// New returns a console over opts.Reader.
func New(opts *Options) (*Handler, error) {
	if opts == nil || opts.Reader == nil {
		return nil, errNoReader
	}
	o := *opts
	if o.Name == "" {
		o.Name = "dump"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SearchBudget <= 0 {
		o.SearchBudget = time.Second
	}
	h := &Handler{o: o, rd: o.Reader, jobs: o.Jobs, log: o.Logger.With(slog.String("component", "dlqdump.console")),
		cache: newSummaryCache(cacheSegments), hist: newHistograms(cacheSegments), scans: make(chan struct{}, 2*runtime.GOMAXPROCS(0)), changes: o.ChangeLog, rates: newJobRates(), jobHist: newJobHistory(), plans: newPlans(), reasons: newLRU[map[string]uint64](cacheSegments), groups: newErrGroups()}
	if h.jobs == nil {
		if st, err := jobs.Open(o.Reader); err == nil {
			h.jobs = st
		}
	}
	if h.changes == nil {
		if l, err := changelog.Open(o.Reader); err == nil {
			h.changes = l
		}
	}
	host, _ := os.Hostname()
	h.owner = "dlqdump-console@" + host
	cl, err := claims.NewClaimer(o.Reader, h.owner, 30*time.Second, nil)
	if err != nil {
		return nil, err
	}
	h.in = &inspect.Inspector{Reader: o.Reader, Claimer: cl}
	h.walker = &inspect.Walker{Reader: o.Reader, Options: func(name string) (*segment.ReaderOptions, error) {
		ro := &segment.ReaderOptions{Name: name}
		if o.Keys != nil {
			ro.Keys = o.Keys
		}
		return ro, nil
	}}
	if len(o.ProtoDescriptorSet) > 0 || o.ProtoMessage != "" {
		if h.proto, err = inspect.LoadProto(o.ProtoDescriptorSet, o.ProtoMessage); err != nil {
			return nil, fmt.Errorf("%w: console: ProtoDescriptorSet/ProtoMessage: %v", dlqdump.ErrConfig, err)
		}
	}
	var tok [24]byte
	if _, err := rand.Read(tok[:]); err != nil {
		return nil, err
	}
	h.token = hex.EncodeToString(tok[:])
	h.cop = http.NewCrossOriginProtection()
	for _, origin := range o.TrustedOrigins {
		if err := h.cop.AddTrustedOrigin(origin); err != nil {
			return nil, fmt.Errorf("%w: console: TrustedOrigins: %v", dlqdump.ErrConfig, err)
		}
	}
	h.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.log.Warn("refused a cross-origin request", slog.String("path", r.URL.Path), slog.String("origin", r.Header.Get("Origin")),
			slog.String("remote", r.RemoteAddr))
		writeError(w, http.StatusForbidden, "cross-origin request refused")
	}))
	h.routes()
	return h, nil
}

func (h *Handler) routes() {
	m := http.NewServeMux()
	static, err := iofs.Sub(webFS, "web")
	if err != nil {
		panic(err)
	}
	files := http.FileServerFS(static)
	m.Handle("GET /static/", http.StripPrefix("/static", files))
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := webFS.ReadFile("web/index.html")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	})
	m.HandleFunc("GET /api/meta", h.handleMeta)
	m.HandleFunc("GET /api/overview", h.handleOverview)
	m.HandleFunc("GET /api/segments", h.handleSegments)
	m.HandleFunc("GET /api/records", h.handleRecords)
	m.HandleFunc("GET /api/record", h.handleRecord)
	m.HandleFunc("GET /api/count", h.handleCount)
	m.HandleFunc("GET /api/errors", h.handleErrors)
	m.HandleFunc("GET /api/preview", h.needs(RoleOperator, h.handlePreview)) // runs a jq program: who may create a job
	m.HandleFunc("GET /api/jobs", h.handleJobs)
	m.HandleFunc("GET /api/jobs/{id}", h.handleJob)
	m.HandleFunc("GET /api/log", h.handleLog)
	m.HandleFunc("GET /api/log/verify", h.handleVerify)
	for _, c := range h.changeRoutes() {
		m.HandleFunc(c.pattern, h.change(c.role, c.fn))
	}
	m.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such API: %s %s", r.Method, r.URL.Path)
	})
	h.mux = h.authorize(m)
}

// changeRoute is a change the console makes: a POST, through change, and
// the least role it needs.
type changeRoute struct {
	pattern string
	role    Role
	fn      http.HandlerFunc
}

// changeRoutes lists every change the console makes. A new action is added
// here, so that it is protected like the others (and the tests that refuse
// each to a viewer find it).
func (h *Handler) changeRoutes() []changeRoute {
	return []changeRoute{
		{"POST /api/jobs", RoleOperator, h.handleCreateJob},
		{"POST /api/jobs/{id}/{verb}", RoleOperator, h.handleControlJob},
		{"POST /api/release", RoleOperator, h.handleRelease}, // all: admin
		{"POST /api/replay", RoleOperator, h.handleReplay},
		{"POST /api/discard", RoleAdmin, h.handleDiscard},
	}
}

// ServeHTTP serves the page, its assets and its API, with headers that
// keep the page from running anything but its own script.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "no-referrer")
	h.mux.ServeHTTP(w, r)
}

// csrfHeader carries the handler's token on every change.
const csrfHeader = "X-Dlqdump-Token"

// change wraps the handler of a change: refused unless the principal's
// role is at least role (read-only mode makes everyone a viewer), without
// the token, from another origin, or with a body that is not JSON.
func (h *Handler) change(role Role, fn http.HandlerFunc) http.HandlerFunc {
	fn = h.needs(role, fn)
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h.cop.Check(r); err != nil {
			h.log.Warn("refused a cross-origin change", slog.String("path", r.URL.Path), slog.String("origin", r.Header.Get("Origin")),
				slog.String("remote", r.RemoteAddr))
			writeError(w, http.StatusForbidden, "cross-origin request refused")
			return
		}
		if got := r.Header.Get(csrfHeader); subtle.ConstantTimeCompare([]byte(got), []byte(h.token)) != 1 {
			h.log.Warn("refused a change without the console's token", slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
			writeError(w, http.StatusForbidden, "missing or wrong %s header (reload the page)", csrfHeader)
			return
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			writeError(w, http.StatusUnsupportedMediaType, "want Content-Type: application/json")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
		fn(w, r)
	}
}

// metaJSON is GET api/meta: what the page needs to know first.
type metaJSON struct {
	Name     string `json:"name"`
	ReadOnly bool   `json:"read_only"`
	// User and Role are the principal's; Can lists the changes its role
	// allows ("replay", "jobs", "release", "release_all", "discard").
	User      string   `json:"user"`
	Role      string   `json:"role"`
	Can       []string `json:"can"`
	ChangeLog bool     `json:"change_log"`
	Token     string   `json:"token,omitempty"`
	Queue     bool     `json:"queue"`
	Restorer  bool     `json:"restorer"`
	Jobs      bool     `json:"jobs"`
	Keys      bool     `json:"keys"`
	Proto     string   `json:"proto,omitempty"`
	Now       string   `json:"now"`
}

func (h *Handler) handleMeta(w http.ResponseWriter, r *http.Request) {
	p := principalOf(r)
	m := metaJSON{Name: h.o.Name, ReadOnly: h.o.ReadOnly, User: p.Name, Role: p.Role.String(), Can: []string{}, ChangeLog: h.changes != nil,
		Queue: h.o.Queue != nil, Restorer: h.o.Restorer != nil, Jobs: h.jobs != nil, Keys: h.o.Keys != nil, Now: inspect.JSONTime(time.Now())}
	if p.Role >= RoleOperator {
		m.Token = h.token
		m.Can = append(m.Can, "replay", "jobs", "release")
	}
	if p.Role >= RoleAdmin {
		m.Can = append(m.Can, "release_all", "discard")
	}
	if h.proto != nil {
		m.Proto = h.proto.Name()
	}
	writeJSON(w, http.StatusOK, m)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, map[string]string{"error": fmt.Sprintf(format, args...)})
}

// decodeBody decodes a change's JSON body, refusing unknown fields.
func decodeBody(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("bad JSON body: %w", err)
	}
	return nil
}

// statusOf maps an error to an HTTP status.
func statusOf(err error) int {
	switch {
	case errors.Is(err, dlqdump.ErrConfig), errors.Is(err, selection.ErrPath), errors.Is(err, selection.ErrSelection):
		return http.StatusBadRequest
	case errors.Is(err, jobs.ErrNotFound), errors.Is(err, sink.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, jobs.ErrExists), errors.Is(err, jobs.ErrFinished), errors.Is(err, sink.ErrExist):
		return http.StatusConflict
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}
