package guard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/rudder-operator/rudder/internal/records"
)

// A template's lookup runs as the release's identity, and public charts feed values to tpl:
// whatever that identity may read, a CR author could copy into an object they can read. So a
// render's lookups read only what its release made (AnnotationOwner is the release's) and
// what the watch's allowReads names; anything else reads as not found, as Helm's lookup reads
// an object it may not see, and the action reports what was withheld. A release record is
// never read, whatever the watch allows. A render makes at most maxLookups lookups, each
// answer at most maxLookupBytes.
//
// The rule is applied to what the API server answers, before the render sees it: a get is
// answered 404 when its object is withheld, and a list without its withheld items.

// DefaultMaxLookups is the most lookups one render may make: public charts make a few (their
// own Secrets, a PVC, their CRDs), each with a discovery request beside it.
const DefaultMaxLookups = 100

// LimitLookups is the name of the lookup limit, as watches.yaml's limits field spells it.
const LimitLookups = "maxLookups"

// maxLookupBytes bounds one answer to a lookup: what rudder's process holds of it at once.
const maxLookupBytes = 8 << 20

// AllowsRead reports whether the watch lets a release read objects of kind gk named name that
// it did not make, by a lookup or by reference (references.go): allowReads names "Kind",
// "Kind.group", "Kind/name" or "Kind.group/name", where "<release>" in a name stands for the
// release's name (scaffold writes it for names a chart builds from the release's). "*" (any
// kind) is scaffold's, which measures what a chart reads.
func (c Confinement) AllowsRead(gk schema.GroupKind, name string) bool {
	for _, r := range c.AllowReads {
		kind, n, named := strings.Cut(r, "/")
		if named && strings.Contains(n, ReleasePlaceholder) {
			if c.Release == "" {
				continue
			}
			n = strings.ReplaceAll(n, ReleasePlaceholder, c.Release)
		}
		if (!named || n == name) && (kind == "*" || namesKind(kind, gk)) {
			return true
		}
	}
	return false
}

// Lookups holds one render's Lookups to the rule above, in front of the action's guard.
type Lookups struct {
	g     *Guard
	max   int
	mu    sync.Mutex
	n     int // resource requests
	other int // discovery and other requests that read no object
	// over: the render asked for more than max lookups; withheld names what read as not found.
	over     bool
	withheld []string
}

// NewLookups holds one render's lookups, at most max of them, to the rule above, in front of
// the action's guard g.
func NewLookups(g *Guard, max int) *Lookups { return &Lookups{g: g, max: max} }

// maxWithheld bounds what a render's withheld list keeps.
const maxWithheld = 16

func (l *Lookups) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		info, err := l.g.requestInfo(req)
		if err != nil {
			return refusal(req, &Violation{Source: SourceRequest, Verb: req.Method, Kind: req.URL.Path,
				Why: "not a request rudder can attribute: " + err.Error()}), nil
		}
		if v := l.count(info); v != nil {
			return refusal(req, v), nil
		}
		if !info.IsResourceRequest {
			return rt.RoundTrip(req)
		}
		if info.Verb != "get" && info.Verb != "list" {
			return refusal(req, &Violation{Source: SourceRequest, Verb: info.Verb, Kind: info.Resource, Name: info.Name,
				Namespace: info.Namespace, Why: "a render's lookups only get and list"}), nil
		}
		req.Header.Set("Accept", "application/json")
		req.Header.Del("Accept-Encoding")
		resp, err := rt.RoundTrip(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		return l.filter(req, resp, info)
	})
}

// count counts a request against the render's bound; the violation when it is over.
func (l *Lookups) count(info *apirequest.RequestInfo) *Violation {
	l.mu.Lock()
	defer l.mu.Unlock()
	if info.IsResourceRequest {
		l.n++
	} else {
		l.other++
	}
	// Each lookup asks discovery about its kind once or twice; more than that is no lookup.
	if l.n > l.max || l.other > 2*l.max+8 {
		l.over = true
		return &Violation{Source: SourceRequest, Verb: info.Verb, Kind: info.Resource, Name: info.Name, Namespace: info.Namespace,
			Why: fmt.Sprintf("the render made more than the %d lookups the watch's limit %s allows", l.max, LimitLookups)}
	}
	return nil
}

// readHead is what the rule reads of an object.
type readHead struct {
	Type     string `json:"type"`
	Metadata struct {
		Name        string            `json:"name"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// readable says why the object of kind gk whose head is h is withheld from the render; "" when
// it may be read.
func (l *Lookups) readable(gk schema.GroupKind, h *readHead) string {
	obj := &unstructured.Unstructured{Object: map[string]any{"type": h.Type}}
	obj.SetGroupVersionKind(gk.WithVersion(""))
	obj.SetName(h.Metadata.Name)
	obj.SetLabels(h.Metadata.Labels)
	if why := recordShaped(obj); why != "" {
		return "a release record, which no render reads: " + why
	}
	if gk == (schema.GroupKind{Kind: "Secret"}) && h.Type == serviceAccountTokenType {
		// Whoever made it: the token is its ServiceAccount's identity, and a lookup would hand
		// it to whoever reads what the render writes.
		return "a ServiceAccount token, which no render reads"
	}
	if l.g.owner != "" && h.Metadata.Annotations[records.AnnotationOwner] == l.g.owner {
		return ""
	}
	if l.g.conf.AllowsRead(gk, h.Metadata.Name) {
		return ""
	}
	return "not made by this release, and the watch's allowReads does not name it"
}

// filter applies the rule to a successful answer.
func (l *Lookups) filter(req *http.Request, resp *http.Response, info *apirequest.RequestInfo) (*http.Response, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxLookupBytes+1))
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	gk := l.g.kindOf(gvrOf(info)).GroupKind()
	if len(body) > maxLookupBytes {
		return refusal(req, &Violation{Source: SourceRequest, Verb: info.Verb, Kind: gk.Kind, Name: info.Name, Namespace: info.Namespace,
			Why: fmt.Sprintf("its answer is over the %d bytes a lookup may read", maxLookupBytes)}), nil
	}
	if info.Name != "" {
		var h readHead
		if err := json.Unmarshal(body, &h); err != nil {
			return nil, fmt.Errorf("reading the answer to a lookup of %s %q: %w", gk.Kind, info.Name, err)
		}
		if why := l.readable(gk, &h); why != "" {
			l.withhold(gk, info.Namespace, info.Name, why)
			return notFound(req, gk, info), nil
		}
		return answer(resp, body), nil
	}
	var list map[string]json.RawMessage
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("reading the answer to a lookup of %s: %w", gk.Kind, err)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(list["items"], &items); err != nil {
		return nil, fmt.Errorf("reading the answer to a lookup of %s: %w", gk.Kind, err)
	}
	kept := items[:0]
	for _, it := range items {
		var h readHead
		if json.Unmarshal(it, &h) != nil {
			continue
		}
		if why := l.readable(gk, &h); why != "" {
			l.withhold(gk, info.Namespace, h.Metadata.Name, why)
			continue
		}
		kept = append(kept, it)
	}
	if list["items"], err = json.Marshal(kept); err != nil {
		return nil, err
	}
	out, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	return answer(resp, out), nil
}

func (l *Lookups) withhold(gk schema.GroupKind, ns, name, why string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	what := fmt.Sprintf("%s %s/%s (%s)", gk.Kind, ns, name, why)
	if len(l.withheld) < maxWithheld && !slices.Contains(l.withheld, what) {
		l.withheld = append(l.withheld, what)
	}
}

// Outcome is what the render's lookups met: whether they were over their bound, and what was
// withheld.
func (l *Lookups) Outcome() (bool, []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.over, slices.Clone(l.withheld)
}

func answer(resp *http.Response, body []byte) *http.Response {
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	resp.Header.Set("Content-Type", "application/json")
	return resp
}

// notFound is the API server's answer for an object that does not exist.
func notFound(req *http.Request, gk schema.GroupKind, info *apirequest.RequestInfo) *http.Response {
	return statusAnswer(req, metav1.Status{Reason: metav1.StatusReasonNotFound, Code: http.StatusNotFound,
		Message: fmt.Sprintf("%s %q not found", info.Resource, info.Name),
		Details: &metav1.StatusDetails{Name: info.Name, Group: gk.Group, Kind: info.Resource}})
}
