package faults

import (
	"errors"
	"net/http"
)

// The S3 operations S3Op tells apart.
const (
	OpPutObject               Op = "s3.PutObject"
	OpCopyObject              Op = "s3.CopyObject"
	OpGetObject               Op = "s3.GetObject"
	OpHeadObject              Op = "s3.HeadObject"
	OpDeleteObject            Op = "s3.DeleteObject"
	OpDeleteObjects           Op = "s3.DeleteObjects"
	OpListObjects             Op = "s3.ListObjects"
	OpCreateMultipartUpload   Op = "s3.CreateMultipartUpload"
	OpUploadPart              Op = "s3.UploadPart"
	OpCompleteMultipartUpload Op = "s3.CompleteMultipartUpload"
	OpAbortMultipartUpload    Op = "s3.AbortMultipartUpload"
	OpListMultipartUploads    Op = "s3.ListMultipartUploads"
	OpListParts               Op = "s3.ListParts"
	OpOtherRequest            Op = "s3.Other"
)

// S3Op names the S3 operation of a request to an object or a bucket, from its
// method, query and headers.
func S3Op(r *http.Request) Op {
	q := r.URL.Query()
	has := func(k string) bool { _, ok := q[k]; return ok }
	switch r.Method {
	case http.MethodPut:
		switch {
		case has("partNumber") && has("uploadId"):
			return OpUploadPart
		case r.Header.Get("X-Amz-Copy-Source") != "":
			return OpCopyObject
		}
		return OpPutObject
	case http.MethodPost:
		switch {
		case has("uploads"):
			return OpCreateMultipartUpload
		case has("uploadId"):
			return OpCompleteMultipartUpload
		case has("delete"):
			return OpDeleteObjects
		}
	case http.MethodGet:
		switch {
		case has("uploads"):
			return OpListMultipartUploads
		case has("uploadId"):
			return OpListParts
		case has("list-type") || has("prefix") || has("delimiter") || isBucketPath(r):
			return OpListObjects
		}
		return OpGetObject
	case http.MethodHead:
		return OpHeadObject
	case http.MethodDelete:
		if has("uploadId") {
			return OpAbortMultipartUpload
		}
		return OpDeleteObject
	}
	return OpOtherRequest
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

// errAs is errors.As, named for brevity where it is used a lot.
func errAs[T error](err error, target *T) bool { return err != nil && errors.As(err, target) }
