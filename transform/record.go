package transform

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/itchyny/gojq"

	"github.com/dlqdump/dlqdump"
)

// payloadKind is how a payload shows in a record's JSON.
type payloadKind uint8

const (
	kindJSON   payloadKind = iota // its JSON value
	kindText                      // a string: UTF-8 text that is not JSON
	kindBase64                    // a string of its base64, "payload_base64": true
)

// decodePayload returns the value a payload shows as, and how.
func decodePayload(p []byte) (any, payloadKind) {
	if v, ok := decodeJSON(p); ok {
		return v, kindJSON
	}
	if utf8.Valid(p) {
		return string(p), kindText
	}
	return base64.StdEncoding.EncodeToString(p), kindBase64
}

// decodeJSON decodes one JSON value, its numbers as json.Number (gojq
// keeps their digits: an order ID of 20 digits stays exact).
func decodeJSON(p []byte) (any, bool) {
	if len(bytes.Trim(p, jsonSpace)) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(p))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if len(bytes.Trim(p[dec.InputOffset():], jsonSpace)) != 0 {
		return nil, false // more than one value, or not JSON's white space
	}
	return v, true
}

// jsonSpace is JSON's white space (RFC 8259): a payload with anything else
// around its value (a form feed, say) is text, delivered as it is.
const jsonSpace = " \t\r\n"

// input returns the JSON object a program sees for r.
func input(r *dlqdump.Replay) (map[string]any, payloadKind) {
	h := make(map[string]any, len(r.Headers))
	for k, v := range r.Headers {
		h[k] = v
	}
	pv, kind := decodePayload(r.Payload)
	m := map[string]any{"id": r.ID.String(), "time": r.Time.UTC().Format(time.RFC3339Nano), "headers": h, "payload": pv}
	if kind == kindBase64 {
		m["payload_base64"] = true
	}
	return m, kind
}

// output applies what a program returned, v, to r, whose payload showed
// as kind. r is unchanged on an error.
func output(v any, kind payloadKind, r *dlqdump.Replay) error {
	m, ok := v.(map[string]any)
	if !ok {
		return fmt.Errorf("the program returned %s, want the record (an object with a payload)", typeOf(v))
	}
	pv, ok := m["payload"]
	if !ok {
		return fmt.Errorf("the record returned has no payload")
	}
	var payload []byte
	b64, _ := m["payload_base64"].(bool)
	s, isString := pv.(string)
	switch {
	case b64:
		if !isString {
			return fmt.Errorf("payload_base64 is true and the payload is %s, want a string", typeOf(pv))
		}
		var err error
		if payload, err = base64.StdEncoding.DecodeString(s); err != nil {
			return fmt.Errorf("payload_base64 is true and the payload is not base64: %v", err)
		}
	case isString && kind != kindJSON:
		payload = []byte(s)
	default:
		var err error
		if payload, err = gojq.Marshal(pv); err != nil {
			return fmt.Errorf("the payload cannot be written as JSON: %v", err)
		}
	}
	headers := r.Headers
	if hv, ok := m["headers"]; ok && hv != nil {
		hm, ok := hv.(map[string]any)
		if !ok {
			return fmt.Errorf("the headers returned are %s, want an object of strings", typeOf(hv))
		}
		headers = make(dlqdump.Headers, len(hm))
		for k, x := range hm {
			switch x := x.(type) {
			case string:
				headers[k] = x
			case nil: // removed
			default:
				return fmt.Errorf("header %q is %s, want a string (tostring makes one)", k, typeOf(x))
			}
		}
	} else if ok {
		headers = dlqdump.Headers{} // null: none
	}
	r.Payload, r.Headers = payload, headers
	return nil
}

// typeOf names the jq type of v.
func typeOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return "a number"
}
