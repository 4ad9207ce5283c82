package faults

import (
	"errors"
	"net/http"

	"github.com/dlqdump/dlqdump/internal/s3op"
)

// The S3 operations S3Op tells apart.
const (
	OpPutObject               Op = "s3." + s3op.PutObject
	OpCopyObject              Op = "s3." + s3op.CopyObject
	OpGetObject               Op = "s3." + s3op.GetObject
	OpHeadObject              Op = "s3." + s3op.HeadObject
	OpDeleteObject            Op = "s3." + s3op.DeleteObject
	OpDeleteObjects           Op = "s3." + s3op.DeleteObjects
	OpListObjects             Op = "s3." + s3op.ListObjects
	OpCreateMultipartUpload   Op = "s3." + s3op.CreateMultipartUpload
	OpUploadPart              Op = "s3." + s3op.UploadPart
	OpCompleteMultipartUpload Op = "s3." + s3op.CompleteMultipartUpload
	OpAbortMultipartUpload    Op = "s3." + s3op.AbortMultipartUpload
	OpListMultipartUploads    Op = "s3." + s3op.ListMultipartUploads
	OpListParts               Op = "s3." + s3op.ListParts
	OpOtherRequest            Op = "s3." + s3op.Other
)

// S3Op names the S3 operation of a request to an object or a bucket, from its
// method, query and headers (package s3op).
func S3Op(r *http.Request) Op { return Op("s3." + s3op.Of(r)) }

// errAs is errors.As, named for brevity where it is used a lot.
func errAs[T error](err error, target *T) bool { return err != nil && errors.As(err, target) }
