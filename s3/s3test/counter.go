package s3test

import (
	"fmt"
	"maps"
	"net/http"
	"sort"
	"strings"
	"sync"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlqdump/dlqdump/internal/s3op"
)

// Counter counts requests by S3 operation: the requests of the clients it
// wraps (Wrap), or those a [Proxy] forwards. It is safe for concurrent use.
type Counter struct {
	mu     sync.Mutex
	counts Counts
}

// Wrap returns an HTTP client that counts every request it sends through
// inner (nil: http.DefaultClient). Set it as a client's
// s3.Options.HTTPClient, for instance with [Server.Client]:
//
//	client := srv.Client(func(o *awss3.Options) { o.HTTPClient = c.Wrap(o.HTTPClient) })
func (c *Counter) Wrap(inner awss3.HTTPClient) awss3.HTTPClient {
	if inner == nil {
		inner = http.DefaultClient
	}
	return counting{c: c, inner: inner}
}

type counting struct {
	c     *Counter
	inner awss3.HTTPClient
}

func (d counting) Do(r *http.Request) (*http.Response, error) {
	d.c.add(s3op.Of(r))
	return d.inner.Do(r)
}

func (c *Counter) add(op string) {
	c.mu.Lock()
	if c.counts == nil {
		c.counts = Counts{}
	}
	c.counts[op]++
	c.mu.Unlock()
}

// Counts returns the requests counted so far by operation ("GetObject",
// "PutObject", "HeadObject", "DeleteObject", "DeleteObjects",
// "ListObjects", "CopyObject", "UploadPart", ...).
func (c *Counter) Counts() Counts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		return Counts{}
	}
	return maps.Clone(c.counts)
}

// Reset sets the counts to zero.
func (c *Counter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.counts)
}

// Counts are requests by S3 operation.
type Counts map[string]int64

// Total returns the requests of every operation.
func (c Counts) Total() int64 {
	var n int64
	for _, v := range c {
		n += v
	}
	return n
}

// Sub returns c less earlier counts.
func (c Counts) Sub(earlier Counts) Counts {
	d := Counts{}
	for k, v := range c {
		if v -= earlier[k]; v != 0 {
			d[k] = v
		}
	}
	return d
}

// Per returns the counts divided by n, as "GetObject 1.00, PutObject
// 2.50", operations in name order; "" when n is 0.
func (c Counts) Per(n int) string {
	if n == 0 {
		return ""
	}
	ops := make([]string, 0, len(c))
	for k := range c {
		ops = append(ops, k)
	}
	sort.Strings(ops)
	parts := make([]string, 0, len(ops))
	for _, op := range ops {
		parts = append(parts, fmt.Sprintf("%s %.2f", op, float64(c[op])/float64(n)))
	}
	return strings.Join(parts, ", ")
}
