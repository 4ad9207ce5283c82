package s3

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// DefaultAbortUploadsAfter is Writer.AbortUploadsAfter's default: how old an
// unfinished multipart upload of a segment must be before Recover aborts it.
const DefaultAbortUploadsAfter = time.Hour

// abortTimeout bounds each cleanup of unfinished uploads, whatever the
// caller's context: the abort of one failed upload, the aborts after a
// segment is stored, and Recover's sweep of stale uploads. A cleanup that
// runs out of time is logged; a bucket lifecycle rule for incomplete uploads
// removes what is left.
const abortTimeout = 10 * time.Second

// uploadPage is one page of unfinished multipart uploads and the server's
// clock when it answered: the Date header of its answer, or the zero time
// when it sent none.
type uploadPage struct {
	uploads []types.MultipartUpload
	now     time.Time
}

// listUploads lists the unfinished multipart uploads of keys starting with
// prefix, page by page. Calls are retried up to Retry.MaxAttempts.
func (s *store) listUploads(ctx context.Context, prefix string) iter.Seq2[uploadPage, error] {
	return func(yield func(uploadPage, error) bool) {
		var keyMarker, idMarker *string
		for {
			var out *awss3.ListMultipartUploadsOutput
			err := s.call(ctx, "ListMultipartUploads", prefix, 0, true, func(ctx context.Context) error {
				var err error
				out, err = s.client.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: &prefix,
					KeyMarker: keyMarker, UploadIdMarker: idMarker})
				if apiCode(err) == "NoSuchUpload" { // gofakes3: no upload ever in the bucket
					out, err = &awss3.ListMultipartUploadsOutput{}, nil
				}
				return err
			})
			if err != nil {
				yield(uploadPage{}, err)
				return
			}
			now, _ := awsmiddleware.GetServerTime(out.ResultMetadata)
			if !yield(uploadPage{uploads: out.Uploads, now: now}, nil) {
				return
			}
			if !aws.ToBool(out.IsTruncated) || out.NextKeyMarker == nil && out.NextUploadIdMarker == nil {
				return
			}
			keyMarker, idMarker = out.NextKeyMarker, out.NextUploadIdMarker
		}
	}
}

// abortOthers aborts every unfinished multipart upload of key, once the
// segment is stored there: those of earlier attempts whose
// CreateMultipartUpload took effect but whose answer was lost, and those of a
// process that died during an upload of the same segment (its spool is
// uploaded again on the next start). Names are unique per segment, so nobody
// else uploads under key. Bounded in time even if ctx is done; a failure is
// logged, and a bucket lifecycle rule for incomplete uploads removes what is
// left.
func (s *store) abortOthers(ctx context.Context, key string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	for page, err := range s.listUploads(actx, key) {
		if err != nil {
			s.log.Warn("listing unfinished multipart uploads of a stored segment failed; a bucket lifecycle rule for incomplete uploads removes them", "key", key, "error", err)
			return
		}
		for _, mu := range page.uploads {
			if aws.ToString(mu.Key) == key {
				s.log.Debug("aborting an unfinished multipart upload of a stored segment", "key", key, "upload", aws.ToString(mu.UploadId))
				s.abortMultipart(actx, key, aws.ToString(mu.UploadId))
			}
		}
	}
}

// abortStale aborts the unfinished multipart uploads of segment keys under
// the prefix (in every area) initiated at least after ago, and returns how
// many it aborted; a negative after aborts them whatever their age. An
// upload's age is the server's own clock, the Date of the listing's answer,
// minus the upload's Initiated time (also the server's), so the local clock
// plays no part; only when the server sends no Date is the local clock used.
// An upload whose age is unknown (no Initiated) is kept. Bounded by
// abortTimeout; keys that are not segments are never touched.
func (s *store) abortStale(ctx context.Context, after time.Duration) (int, error) {
	actx, cancel := context.WithTimeout(ctx, abortTimeout)
	defer cancel()
	aborted := 0
	for page, err := range s.listUploads(actx, s.prefix) {
		if err != nil {
			return aborted, err
		}
		now := page.now
		if now.IsZero() {
			now = time.Now()
		}
		for _, mu := range page.uploads {
			key, id, initiated := aws.ToString(mu.Key), aws.ToString(mu.UploadId), aws.ToTime(mu.Initiated)
			if !s.isSegmentKey(key) {
				continue
			}
			age := now.Sub(initiated)
			if after >= 0 && (initiated.IsZero() || age < after) {
				continue
			}
			s.log.Info("aborting an unfinished multipart upload of a segment left by a process that stopped during it",
				slog.String("key", key), slog.String("upload", id), slog.Time("initiated", initiated), slog.Duration("age", age.Round(time.Second)))
			if err := s.abort(actx, key, id); err != nil {
				return aborted, err
			}
			aborted++
		}
	}
	return aborted, nil
}

// isSegmentKey reports whether key is a segment's key under the prefix, in
// one of the areas.
func (s *store) isSegmentKey(key string) bool {
	rest, ok := strings.CutPrefix(key, s.prefix)
	if !ok {
		return false
	}
	for _, area := range []string{QuarantinePrefix, ArchivePrefix} {
		if name, ok := strings.CutPrefix(rest, area); ok {
			return checkName(name) == nil
		}
	}
	return checkName(rest) == nil
}

// abortMultipart aborts an upload, bounded in time even if ctx is done, so
// that its parts are not kept (and billed) forever. A failure is logged.
func (s *store) abortMultipart(ctx context.Context, key, id string) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	if err := s.abort(actx, key, id); err != nil {
		s.log.Warn("aborting a failed multipart upload failed; a bucket lifecycle rule for incomplete uploads removes its parts", "error", err)
	}
}

// abort aborts an upload; one already gone is no error.
func (s *store) abort(ctx context.Context, key, id string) error {
	return s.call(ctx, "AbortMultipartUpload", key, 0, true, func(ctx context.Context) error {
		_, err := s.client.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: &id})
		if notFound(err) || apiCode(err) == "NoSuchUpload" {
			return nil
		}
		return err
	})
}

// sweepErr is the error of a sweep of stale uploads that did not finish.
func (s *store) sweepErr(aborted int, err error) error {
	return fmt.Errorf("dlqdump: s3: abort stale multipart uploads under s3://%s/%s (%d aborted before the failure): %w", s.bucket, s.prefix, aborted, err)
}
