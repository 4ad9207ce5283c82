package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/dlqdump/dlqdump"
	"github.com/dlqdump/dlqdump/internal/backoff"
)

// maxRetryAfter caps how long a Retry-After answer makes a record wait.
const maxRetryAfter = time.Minute

// maxConcurrency bounds --concurrency.
const maxConcurrency = 256

// httpDest POSTs each restored record to a URL: the payload as the body,
// the headers as X-Dlq-KEY request headers, the record's ID (its
// dlqdump.HeaderRecordID) also as Idempotency-Key. Only a 2xx answer to that POST
// is a delivery: redirects are not followed (a client following a 301, 302
// or 303 re-sends a GET without the body, and its 200 would count a record
// nobody received), a 3xx answer is a refusal naming its Location.
//
// It tells a record the endpoint refuses from an endpoint that is down. A
// refusal (a 3xx, or a 4xx other than 408, 425 and 429) is returned at once,
// and the Restorer quarantines the record. An outage (connection errors,
// timeouts, 408, 425, 429 and 5xx) is retried with exponential backoff and
// full jitter, up to maxAttempts; one still there then trips the
// destination: that Enqueue and every later one (those in flight stop at
// once) return an error wrapping dlqdump.ErrUnavailable, so the Restorer
// stops the pass at the first record not delivered and leaves it, and every
// record after it, in the dump. Once stop is done (an interrupt), no new
// attempt is made and no backoff waited: only the POSTs in flight finish.
// Enqueue is safe for concurrent use.
type httpDest struct {
	ctx         context.Context // cancelled when the destination trips, with the outage as the cause
	trip        context.CancelCauseFunc
	parent      context.Context // what ctx derives from: done, the run ended, not an outage
	stop        context.Context // done: no new attempt
	client      *http.Client
	url         string
	contentType string
	maxAttempts int
	base, max   time.Duration
	timeout     time.Duration
	bar         *progress

	retries atomic.Uint64
}

func newHTTPDest(ctx, stop context.Context, url string, f *restoreFlags) *httpDest {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = max(16, f.concurrency)
	d := &httpDest{
		client: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // the 3xx itself is the answer
		}},
		url:         url,
		contentType: f.contentType,
		maxAttempts: f.maxAttempts,
		base:        f.retryBase,
		max:         f.retryMax,
		timeout:     f.timeout,
		parent:      ctx,
		stop:        stop,
	}
	d.ctx, d.trip = context.WithCancelCause(ctx)
	return d
}

// tripped reports whether an outage tripped the destination.
func (d *httpDest) tripped() bool { return d.ctx.Err() != nil && d.parent.Err() == nil }

// Enqueue delivers one record; it implements the Restorer's destination.
func (d *httpDest) Enqueue(x any) error {
	payload, headers, err := unpack(x)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		if err := d.stopped(); err != nil {
			return err
		}
		if err := d.stop.Err(); attempt > 1 && err != nil {
			return fmt.Errorf("POST %s: not tried again: interrupted (%w)", d.url, err)
		}
		retry, after, err := d.post(payload, headers)
		if err == nil {
			d.bar.add(1)
			return nil
		}
		if err := d.stopped(); err != nil {
			return err
		}
		if !retry {
			return fmt.Errorf("POST %s: %v (not retried)", d.url, err)
		}
		if attempt >= d.maxAttempts {
			out := fmt.Errorf("%w: POST %s: %v (%s)", dlqdump.ErrUnavailable, d.url, err, plural(attempt, "attempt"))
			d.trip(out)
			return out
		}
		d.retries.Add(1)
		wait := backoff.FullJitter(d.base, d.max, attempt)
		if after > wait {
			wait = min(after, maxRetryAfter)
		}
		if err := d.sleep(wait); err != nil {
			return err
		}
	}
}

// sleep waits before an attempt, until the destination trips or stop.
func (d *httpDest) sleep(wait time.Duration) error {
	ctx, cancel := context.WithCancel(d.ctx)
	defer cancel()
	unwatch := context.AfterFunc(d.stop, cancel)
	defer unwatch()
	if backoff.Sleep(ctx, wait) == nil {
		return nil
	}
	if err := d.stopped(); err != nil {
		return err
	}
	return fmt.Errorf("POST %s: not tried again: interrupted (%w)", d.url, d.stop.Err())
}

// stopped returns why no more records are to be posted: the outage that
// tripped the destination, or the run's own end; nil while neither.
func (d *httpDest) stopped() error {
	if d.ctx.Err() == nil {
		return nil
	}
	return context.Cause(d.ctx)
}

// post makes one attempt. retry says whether a failure is worth retrying;
// after is the wait a Retry-After answer asks for.
func (d *httpDest) post(payload []byte, headers map[string]string) (retry bool, after time.Duration, err error) {
	ctx, cancel := context.WithTimeout(d.ctx, d.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(payload))
	if err != nil {
		return false, 0, err
	}
	req.Header.Set("Content-Type", d.contentType)
	req.Header.Set("User-Agent", "dlqdump/"+buildVersion())
	for k, v := range headers {
		req.Header.Add(headerName(k), headerValue(v))
	}
	if id := headers[dlqdump.HeaderRecordID]; id != "" {
		// The record's ID, the same on every delivery of it: the
		// endpoint drops what it has seen (a crash re-delivers a block).
		req.Header.Set("Idempotency-Key", id)
	}
	resp, err := d.client.Do(req)
	if err != nil {
		// Connection refused or reset, timeouts, TLS handshake failures:
		// all worth another try. The method and URL are said by the
		// caller.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return true, 0, err
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, 0, nil
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// Not followed: the record was not delivered, whatever the
		// redirect's target would answer.
		loc := resp.Header.Get("Location")
		if u, err := resp.Location(); err == nil {
			loc = u.String()
		}
		if loc == "" {
			loc = "(none)"
		}
		return false, 0, fmt.Errorf("%s, Location %s: a redirect is not a delivery (give --to the URL that accepts the POST itself)", resp.Status, loc)
	}
	err = fmt.Errorf("%s", resp.Status)
	if s := strings.TrimSpace(string(snippet)); s != "" && printable([]byte(s)) {
		err = fmt.Errorf("%s: %s", resp.Status, s)
	}
	switch c := resp.StatusCode; {
	case c == http.StatusRequestTimeout, c == http.StatusTooEarly, c == http.StatusTooManyRequests, c >= 500:
		return true, retryAfter(resp.Header.Get("Retry-After")), err
	}
	return false, 0, err
}

// retryAfter parses a Retry-After value: seconds or an HTTP date.
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && s >= 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}

// headerName returns the request header carrying a record header: the W3C
// traceparent and tracestate as they are, any other as X-Dlq- followed by
// the key, characters not allowed in a header name replaced by "-", in
// canonical form (X-Dlq-Reason).
func headerName(k string) string {
	if k == dlqdump.HeaderTraceParent || k == dlqdump.HeaderTraceState {
		return k // W3C Trace Context's own headers, for the endpoint's tracing to continue
	}
	b := []byte(k)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) == 0 {
		b = []byte("-")
	}
	return http.CanonicalHeaderKey("X-Dlq-" + string(b))
}

// headerValue returns a value that may travel in a header: as it is when it
// is printable ASCII, else RFC 2047 encoded (=?utf-8?q?...?=).
func headerValue(v string) string {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return mime.QEncoding.Encode("utf-8", v)
		}
	}
	return v
}
