// Package kmstest is a fake AWS KMS for tests: an in-process HTTP server
// speaking the KMS JSON protocol (awsJson1_1, X-Amz-Target TrentService.*)
// for the two calls dlqdump makes, Encrypt and Decrypt, with symmetric keys
// it makes up, encryption contexts bound to ciphertexts, and KMS's errors
// (IncorrectKeyException, InvalidCiphertextException, NotFoundException,
// AccessDeniedException). It counts calls and can be made to fail, to test
// what a reader does when the key service is down.
package kmstest

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/kms"
)

// Region and Account are those of the keys' ARNs.
const (
	Region  = "us-east-1"
	Account = "111122223333"
)

// Server is a fake KMS.
type Server struct {
	*httptest.Server

	mu     sync.Mutex
	keys   map[string][]byte // ARN -> AES-256 key
	denied map[string]bool   // ARNs whose Decrypt is AccessDenied
	down   bool
	calls  map[string]int
}

// NewServer starts a fake KMS with a key for each of names (key IDs; their
// ARNs are ARN(name)). Close it when done.
func NewServer(names ...string) *Server {
	s := &Server{keys: map[string][]byte{}, denied: map[string]bool{}, calls: map[string]int{}}
	for _, n := range names {
		k := make([]byte, 32)
		_, _ = rand.Read(k)
		s.keys[ARN(n)] = k
	}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// ARN returns the ARN of the key named name.
func ARN(name string) string { return "arn:aws:kms:" + Region + ":" + Account + ":key/" + name }

// Client returns a KMS client of the server, with made-up credentials.
func (s *Server) Client() *kms.Client {
	return kms.New(kms.Options{
		BaseEndpoint: aws.String(s.URL),
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("AKIAFAKE", "fake", ""),
		HTTPClient:   s.Server.Client(),
	})
}

// SetDown makes every call fail with HTTP 500 (KMSInternalException) while
// down is true, as a service that cannot be reached.
func (s *Server) SetDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

// Deny makes Decrypt with the key named name answer AccessDeniedException.
func (s *Server) Deny(name string) {
	s.mu.Lock()
	s.denied[ARN(name)] = true
	s.mu.Unlock()
}

// Calls returns the number of calls of op ("Encrypt", "Decrypt") served.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

type request struct {
	KeyID             string            `json:"KeyId"`
	Plaintext         []byte            `json:"Plaintext"`
	CiphertextBlob    []byte            `json:"CiphertextBlob"`
	EncryptionContext map[string]string `json:"EncryptionContext"`
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	op, ok := strings.CutPrefix(r.Header.Get("X-Amz-Target"), "TrentService.")
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var req request
	if !ok || r.Method != http.MethodPost || err != nil || json.Unmarshal(body, &req) != nil {
		fail(w, http.StatusBadRequest, "ValidationException", "malformed request")
		return
	}
	if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
		fail(w, http.StatusBadRequest, "MissingAuthenticationTokenException", "request not signed")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	if s.down {
		fail(w, http.StatusInternalServerError, "KMSInternalException", "the fake KMS is down")
		return
	}
	switch op {
	case "Encrypt":
		s.encrypt(w, &req)
	case "Decrypt":
		s.decrypt(w, &req)
	default:
		fail(w, http.StatusBadRequest, "UnsupportedOperationException", op+" is not faked")
	}
}

// resolve returns the ARN of a key ID or ARN.
func (s *Server) resolve(id string) (string, bool) {
	if _, ok := s.keys[id]; ok {
		return id, true
	}
	if _, ok := s.keys[ARN(id)]; ok {
		return ARN(id), true
	}
	return "", false
}

// A ciphertext blob: "fake1", the ARN's length (u16) and bytes, a nonce and
// the AES-GCM ciphertext, with the encryption context as authenticated data.
func (s *Server) encrypt(w http.ResponseWriter, req *request) {
	arn, ok := s.resolve(req.KeyID)
	if !ok {
		fail(w, http.StatusBadRequest, "NotFoundException", "key "+req.KeyID+" does not exist")
		return
	}
	if len(req.Plaintext) == 0 || len(req.Plaintext) > 4096 {
		fail(w, http.StatusBadRequest, "ValidationException", "plaintext of 1 to 4096 bytes")
		return
	}
	blob := append([]byte("fake1"), byte(len(arn)>>8), byte(len(arn)))
	blob = append(blob, arn...)
	nonce := make([]byte, 12)
	_, _ = rand.Read(nonce)
	blob = append(blob, nonce...)
	blob = gcm(s.keys[arn]).Seal(blob, nonce, req.Plaintext, contextAAD(req.EncryptionContext))
	reply(w, map[string]any{"CiphertextBlob": blob, "KeyId": arn, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"})
}

func (s *Server) decrypt(w http.ResponseWriter, req *request) {
	b := req.CiphertextBlob
	if len(b) < 7 || string(b[:5]) != "fake1" || len(b) < 7+int(binary.BigEndian.Uint16(b[5:]))+12+16 {
		fail(w, http.StatusBadRequest, "InvalidCiphertextException", "not a ciphertext of this KMS")
		return
	}
	n := int(binary.BigEndian.Uint16(b[5:]))
	arn := string(b[7 : 7+n])
	key, ok := s.keys[arn]
	if !ok {
		fail(w, http.StatusBadRequest, "NotFoundException", "the ciphertext's key does not exist")
		return
	}
	if req.KeyID != "" {
		if want, ok := s.resolve(req.KeyID); !ok || want != arn {
			fail(w, http.StatusBadRequest, "IncorrectKeyException", "the ciphertext was not encrypted under "+req.KeyID)
			return
		}
	}
	if s.denied[arn] {
		fail(w, http.StatusBadRequest, "AccessDeniedException", "not authorized to kms:Decrypt "+arn)
		return
	}
	nonce := b[7+n : 7+n+12]
	pt, err := gcm(key).Open(nil, nonce, b[7+n+12:], contextAAD(req.EncryptionContext))
	if err != nil {
		fail(w, http.StatusBadRequest, "InvalidCiphertextException", "the ciphertext or its encryption context is wrong")
		return
	}
	reply(w, map[string]any{"Plaintext": pt, "KeyId": arn, "EncryptionAlgorithm": "SYMMETRIC_DEFAULT"})
}

func gcm(key []byte) cipher.AEAD {
	c, _ := aes.NewCipher(key)
	g, _ := cipher.NewGCM(c)
	return g
}

// contextAAD is an encryption context in a canonical form.
func contextAAD(ctx map[string]string) []byte {
	keys := make([]string, 0, len(ctx))
	for k := range ctx {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%q=%q;", k, ctx[k])
	}
	return b.Bytes()
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-ErrorType", code)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
}
