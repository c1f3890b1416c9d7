package httpapi

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// meta is the envelope every answer carries, as the reference service
// defines it.
type meta struct {
	Message string `json:"message"`
	Code    int    `json:"code"`
	Status  string `json:"status"`
}

type envelope struct {
	Meta meta `json:"meta"`
	Data any  `json:"data,omitempty"`
}

// writeJSON answers code with {"meta":{"message":"success","code":code,"status":"ok"},"data":data}.
func writeJSON(w http.ResponseWriter, code int, data any) {
	writeEnvelope(w, code, envelope{Meta: meta{Message: "success", Code: code, Status: "ok"}, Data: data})
}

// writeError answers code with {"meta":{"message":msg,"code":code,"status":"error"}}
// and data (nil for none).
func writeError(w http.ResponseWriter, code int, msg string, data any) {
	writeEnvelope(w, code, envelope{Meta: meta{Message: msg, Code: code, Status: "error"}, Data: data})
}

func writeEnvelope(w http.ResponseWriter, code int, e envelope) {
	b, err := json.Marshal(e)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"meta":{"message":"internal error","code":500,"status":"error"}}`)
	}
	writeBytes(w, code, b)
}

// writeBytes writes one JSON body. net/http sets Content-Length itself for
// a body written at once and under 2 KiB; larger ones get it here.
func writeBytes(w http.ResponseWriter, code int, b []byte) {
	h := w.Header()
	h["Content-Type"] = contentTypeJSON
	if len(b) >= 2048 {
		h["Content-Length"] = []string{strconv.Itoa(len(b))}
	}
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

var contentTypeJSON = []string{"application/json"}

// methodNotAllowed answers 405 with the allowed methods.
func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method not allowed; use "+allow, nil)
}
