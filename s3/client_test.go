package s3

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// The clients a Writer and a Reader derive from the caller's client share no
// mutable SDK state with it or with each other (issue 11, defect 6): building
// one used to bind the SDK's default S3 Express credentials provider, shared
// by every copy of the options, to the new client, racing with the requests
// of the others. A provider the caller set is the caller's and is kept.
func TestOneAttemptClientSharesNoMutableState(t *testing.T) {
	c := awss3.New(awss3.Options{Region: "us-east-1"})
	a, b := oneAttemptClient(c), oneAttemptClient(c)
	pc, pa, pb := c.Options().ExpressCredentials, a.Options().ExpressCredentials, b.Options().ExpressCredentials
	if pa == nil || pb == nil {
		t.Fatal("a derived client has no S3 Express credentials provider")
	}
	if pa == pc || pb == pc || pa == pb {
		t.Fatal("derived clients share the SDK's default S3 Express credentials provider with the caller's client or each other")
	}
	if a.Options().RetryMaxAttempts != 1 || c.Options().RetryMaxAttempts == 1 {
		t.Fatalf("RetryMaxAttempts: derived %d, caller's %d; want 1 and the caller's unchanged", a.Options().RetryMaxAttempts, c.Options().RetryMaxAttempts)
	}
	own := ownExpress{}
	mine := awss3.New(awss3.Options{Region: "us-east-1", ExpressCredentials: own})
	if got := oneAttemptClient(mine).Options().ExpressCredentials; got != own {
		t.Fatalf("the caller's own S3 Express provider was replaced by %T", got)
	}
}

type ownExpress struct{}

func (ownExpress) Retrieve(context.Context, string) (aws.Credentials, error) {
	return aws.Credentials{}, nil
}
