package faults

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"syscall"
)

// Doer sends HTTP requests; *http.Client and the AWS SDK's HTTP clients are
// Doers (the SDK's s3.Options.HTTPClient is this interface).
type Doer interface {
	Do(*http.Request) (*http.Response, error)
}

// HTTPClient counts every request it sends under the Op Classify gives it and
// fails the requests at its Injector's points:
//
//   - Fail: the request is not sent; the answer is 500 InternalError.
//   - Lost: the request is sent and takes effect; its response is thrown
//     away and the client sees the connection reset.
//   - Stall: the request is not sent until released or its context ends;
//     then the connection is reset.
//   - StallAfter: the request is sent and takes effect; its response is
//     thrown away and the client waits until released or its context
//     ends; then the connection is reset.
//   - Crash, CrashAfter: the process dies before sending it or after its
//     response arrived.
//
// Give it to an AWS SDK client as Options.HTTPClient. A response with a 5xx
// status is reported to Injector.Observe as a failure.
type HTTPClient struct {
	// Inner sends the requests. Required.
	Inner Doer
	// Injector counts and fails requests. Required.
	Injector *Injector
	// Classify names a request's operation. Default S3Op.
	Classify func(*http.Request) Op
}

// Do sends req, or fails it as the plan says.
func (c *HTTPClient) Do(req *http.Request) (*http.Response, error) {
	classify := c.Classify
	if classify == nil {
		classify = S3Op
	}
	resp, err := Call(req.Context(), c.Injector, classify(req), func() (*http.Response, error) {
		resp, err := c.Inner.Do(req)
		if err == nil && resp.StatusCode >= 500 {
			// Reported as a failure to the observer; the caller gets
			// the response, whose body is kept for it.
			return resp, &statusError{resp: resp}
		}
		return resp, err
	}, func(resp *http.Response) {
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	})
	var se *statusError
	if errAs(err, &se) {
		return se.resp, nil
	}
	var fe *Error
	if !errAs(err, &fe) {
		return resp, err
	}
	if fe.Point.Mode == Fail {
		return internalError(req, fe), nil
	}
	return nil, &url.Error{Op: req.Method, URL: req.URL.String(), Err: &net.OpError{Op: "read", Net: "tcp",
		Err: fmt.Errorf("%w (%v)", os.NewSyscallError("read", syscall.ECONNRESET), fe)}}
}

// statusError carries a 5xx response through Call, so that Observe sees a
// failure.
type statusError struct{ resp *http.Response }

func (e *statusError) Error() string { return "HTTP " + e.resp.Status }

// internalError returns the response S3 gives when it fails a request
// without acting on it.
func internalError(req *http.Request, fe *Error) *http.Response {
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code><Message>%s</Message><RequestId>faults</RequestId></Error>`, fe)
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	return &http.Response{
		Status:        "500 Internal Server Error",
		StatusCode:    http.StatusInternalServerError,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/xml"}},
		Body:          io.NopCloser(bytes.NewReader([]byte(body))),
		ContentLength: int64(len(body)),
		Request:       req,
	}
}
