// Package s3op names the S3 operation of an HTTP request, for the tools that
// stand between a client and a server: the fault injector (internal/faults)
// and the latency proxy (s3/s3test).
package s3op

import "net/http"

// The S3 operations Of tells apart.
const (
	PutObject               = "PutObject"
	CopyObject              = "CopyObject"
	GetObject               = "GetObject"
	HeadObject              = "HeadObject"
	DeleteObject            = "DeleteObject"
	DeleteObjects           = "DeleteObjects"
	ListObjects             = "ListObjects"
	CreateMultipartUpload   = "CreateMultipartUpload"
	UploadPart              = "UploadPart"
	CompleteMultipartUpload = "CompleteMultipartUpload"
	AbortMultipartUpload    = "AbortMultipartUpload"
	ListMultipartUploads    = "ListMultipartUploads"
	ListParts               = "ListParts"
	Other                   = "Other"
)

// Of names the S3 operation of a request to an object or a bucket, from its
// method, query and headers.
func Of(r *http.Request) string {
	q := r.URL.Query()
	has := func(k string) bool { _, ok := q[k]; return ok }
	switch r.Method {
	case http.MethodPut:
		switch {
		case has("partNumber") && has("uploadId"):
			return UploadPart
		case r.Header.Get("X-Amz-Copy-Source") != "":
			return CopyObject
		}
		return PutObject
	case http.MethodPost:
		switch {
		case has("uploads"):
			return CreateMultipartUpload
		case has("uploadId"):
			return CompleteMultipartUpload
		case has("delete"):
			return DeleteObjects
		}
	case http.MethodGet:
		switch {
		case has("uploads"):
			return ListMultipartUploads
		case has("uploadId"):
			return ListParts
		case has("list-type") || has("prefix") || has("delimiter") || isBucketPath(r):
			return ListObjects
		}
		return GetObject
	case http.MethodHead:
		return HeadObject
	case http.MethodDelete:
		if has("uploadId") {
			return AbortMultipartUpload
		}
		return DeleteObject
	}
	return Other
}

// isBucketPath reports whether a path-style request names a bucket only.
func isBucketPath(r *http.Request) bool {
	p := r.URL.Path
	if len(p) > 0 && p[0] == '/' {
		p = p[1:]
	}
	for i := 0; i < len(p); i++ {
		if p[i] == '/' {
			return i == len(p)-1
		}
	}
	return true
}
