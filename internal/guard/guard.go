package guard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	apirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/rudder-operator/rudder/internal/libtext"
)

// Guard is the last line of confinement: it sees every request Helm makes for one action —
// the render's lookups, reads and writes of objects, hooks and CRDs, deletions — and refuses
// those outside the release's confinement before they leave the process (with a 403 that
// names the rule, so that Helm fails the action there). It also remembers what it refused and
// what the API server refused, because Helm's template engine flattens a lookup's error into a
// string: the Client reads the Guard to say why an action failed.
//
// The objects of an action are checked before its first write (post-renderer, CheckRelease);
// the Guard is what holds a template's lookup to the same rule, and what would catch any path
// of Helm's that those checks miss.
type Guard struct {
	// ctx is the action's: every request the guard passes ends with it (see bind).
	ctx    context.Context
	conf   Confinement
	mapper meta.RESTMapper
	// prefix is the path of the API server's URL ("" for most), which request paths start with.
	prefix string
	// owner, when set, is the AnnotationOwner of what the release made: the only objects its
	// updates, patches and deletes may reach (see ownership.go).
	owner string

	mu        sync.Mutex
	refused   []Violation
	forbidden []string
	// unavailable holds what failed requests that are worth retrying as they are said: the
	// transport's error as the client reports it, or the API server's message for 429 and 5xx.
	unavailable []string
}

// New is the guard of one action of a release confined by conf (ctx: the action's; owner: the
// AnnotationOwner of what the release made, "" to check no ownership), for an API server whose
// URL has the path prefix.
func New(ctx context.Context, conf Confinement, mapper meta.RESTMapper, prefix, owner string) *Guard {
	return &Guard{ctx: ctx, conf: conf, mapper: mapper, prefix: prefix, owner: owner}
}

// OwnerMark is the AnnotationOwner of what the guarded release made ("": ownership is not
// checked).
func (g *Guard) OwnerMark() string { return g.owner }

// maxUnavailable bounds what a guard keeps of failed requests.
const maxUnavailable = 32

var requestInfos = &apirequest.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

func (g *Guard) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		req, release := g.bind(req)
		resp, err := g.roundTrip(rt, req)
		if err != nil || resp == nil || resp.Body == nil {
			release()
			return resp, err
		}
		resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
		return resp, nil
	})
}

// bind makes req end with the action (g.ctx): Helm makes its requests, a hook's watch above
// all, in contexts of its own, which a CR's deletion or rudder's stop would not end. release
// lets go of the binding once the answer is read.
func (g *Guard) bind(req *http.Request) (_ *http.Request, release func()) {
	if g.ctx == nil || g.ctx.Done() == nil {
		return req, func() {}
	}
	ctx, cancel := context.WithCancelCause(req.Context())
	stop := context.AfterFunc(g.ctx, func() { cancel(context.Cause(g.ctx)) })
	return req.WithContext(ctx), func() {
		stop()
		cancel(nil)
	}
}

// releasingBody releases a request's binding when its answer is closed.
type releasingBody struct {
	io.ReadCloser
	release func()
	once    sync.Once
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}

// roundTrip sends req unless it is outside the confinement, and notes how it was refused or
// failed.
func (g *Guard) roundTrip(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	v, info := g.decide(req)
	if v == nil && g.owner != "" && info != nil && mutates(info) {
		var answer *http.Response
		var err error
		if v, answer, err = g.checkOwned(req, rt, info); err != nil || answer != nil {
			return answer, err
		}
	}
	if v != nil {
		g.note(*v)
		return refusal(req, v), nil
	}
	resp, err := rt.RoundTrip(req)
	switch {
	case err != nil && req.Context().Err() != nil:
		// The action was cancelled (see bind): nothing to say about the API server.
	case err != nil:
		// As the http.Client above reports it, with the method and URL: the transport's
		// own text ("EOF") could be part of any error.
		g.noteUnavailable((&url.Error{Op: urlErrorOp(req.Method), URL: req.URL.String(), Err: err}).Error())
	case resp.StatusCode == http.StatusForbidden:
		g.noteForbidden(req, resp)
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= http.StatusInternalServerError:
		if msg := statusMessage(resp); msg != "" {
			g.noteUnavailable(msg)
		}
	}
	return resp, err
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// decide returns the violation a request would be, or nil when it is within the confinement.
// Requests that are not about resources (discovery, /version, OpenAPI) read nothing of a
// tenant's and pass.
func (g *Guard) decide(req *http.Request) (*Violation, *apirequest.RequestInfo) {
	info, err := g.requestInfo(req)
	if err != nil {
		return &Violation{Source: SourceRequest, Verb: req.Method, Kind: req.URL.Path,
			Why: "not a request rudder can attribute: " + err.Error()}, nil
	}
	return g.decideInfo(info), info
}

func (g *Guard) decideInfo(info *apirequest.RequestInfo) *Violation {
	if !info.IsResourceRequest {
		return nil
	}
	if info.Verb == "deletecollection" && g.owner != "" {
		return &Violation{Source: SourceRequest, Verb: info.Verb, Kind: info.Resource, Namespace: info.Namespace,
			Why: "a release deletes only what it made, one object at a time"}
	}
	gvr := gvrOf(info)
	if gvr.Group == "" && gvr.Resource == "namespaces" {
		// A Namespace is cluster-scoped; reading one the release may act in is fine (charts
		// look up their own namespace's labels), anything else needs allowClusterScoped.
		gk := schema.GroupKind{Kind: "Namespace"}
		if g.conf.AllowsClusterScoped(gk) || (info.Verb == "get" && info.Name != "" && g.conf.AllowsNamespace(info.Name)) {
			return nil
		}
		return &Violation{Source: SourceRequest, Verb: info.Verb, Kind: "Namespace", Name: info.Name,
			Why: "cluster-scoped, and the watch's allowClusterScoped does not name Namespace"}
	}
	if info.Namespace != "" {
		if g.conf.AllowsNamespace(info.Namespace) {
			return nil // most requests: no need to know the kind
		}
		return &Violation{Source: SourceRequest, Verb: info.Verb, Kind: g.kindOf(gvr).Kind, Name: info.Name, Namespace: info.Namespace,
			Why: g.conf.outsideNamespaces()}
	}
	kind := g.kindOf(gvr)
	m, err := g.mapper.RESTMapping(kind.GroupKind(), kind.Version)
	if err != nil {
		return &Violation{Source: SourceRequest, Verb: info.Verb, Kind: gvr.GroupResource().String(), Name: info.Name,
			Why: "a resource rudder cannot map to a kind: " + err.Error()}
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if g.conf.AllowsNamespace("*") {
			return nil
		}
		return &Violation{Source: SourceRequest, Verb: info.Verb, Kind: kind.Kind, Name: info.Name,
			Why: "across all namespaces, " + g.conf.outsideNamespaces()}
	}
	return g.conf.checkObject(SourceRequest, kind, info.Name, "", false).withVerb(info.Verb)
}

func (v *Violation) withVerb(verb string) *Violation {
	if v != nil {
		v.Verb = verb
	}
	return v
}

func (g *Guard) requestInfo(req *http.Request) (*apirequest.RequestInfo, error) {
	if g.prefix == "" {
		return requestInfos.NewRequestInfo(req)
	}
	r := req.Clone(req.Context())
	r.URL.Path = strings.TrimPrefix(r.URL.Path, g.prefix)
	return requestInfos.NewRequestInfo(r)
}

// kindOf names a resource's kind for messages and scope; the resource itself when unmapped.
func (g *Guard) kindOf(gvr schema.GroupVersionResource) schema.GroupVersionKind {
	if k, err := g.mapper.KindFor(gvr); err == nil {
		return k
	}
	return schema.GroupVersionKind{Group: gvr.Group, Version: gvr.Version, Kind: gvr.Resource}
}

// refusal is the response of a refused request: a Status like the API server's own 403, so that
// every client (Helm's kube client, the lookup's dynamic client) reports it as a refusal.
func refusal(req *http.Request, v *Violation) *http.Response {
	return statusAnswer(req, metav1.Status{Reason: metav1.StatusReasonForbidden, Code: http.StatusForbidden,
		Message: "rudder confinement: " + v.String()})
}

// statusAnswer is an answer to req of the API server's form: st, a failure, as its body.
func statusAnswer(req *http.Request, st metav1.Status) *http.Response {
	st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
	st.Status = metav1.StatusFailure
	body, _ := json.Marshal(st) // a plain struct: cannot fail
	return &http.Response{
		StatusCode: int(st.Code), Status: fmt.Sprintf("%d %s", st.Code, http.StatusText(int(st.Code))), Proto: "HTTP/1.1", ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     http.Header{"Content-Type": []string{"application/json"}},
		Body:       io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

// note remembers a refused request (the first maxUnavailable of them).
func (g *Guard) note(v Violation) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.refused) < maxUnavailable {
		g.refused = append(g.refused, v)
	}
}

// noteForbidden remembers a request the API server's authorization refused (RBAC of rudder, or
// of the tenant's ServiceAccount), with the server's own message, which names the user, verb,
// resource and namespace. A 403 of admission (a quota, a webhook) is the action's own failure,
// which Helm's error says.
func (g *Guard) noteForbidden(req *http.Request, resp *http.Response) {
	msg := statusMessage(resp)
	if msg == "" {
		msg = fmt.Sprintf("%s %s", req.Method, req.URL.Path)
	} else if !libtext.Unauthorized(msg) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forbidden = append(g.forbidden, msg)
}

// urlErrorOp is the Op of the url.Error an http.Client wraps a request's failure in.
func urlErrorOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// statusMessage is the message of the Status an API server's error response carries ("" when
// it carries none); the response's body is left to be read again.
func statusMessage(resp *http.Response) string {
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return ""
	}
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	var st metav1.Status
	if json.Unmarshal(b, &st) != nil {
		return ""
	}
	return st.Message
}

// noteUnavailable remembers a request that failed in a way worth retrying as it is: the API
// server unreachable, overloaded, or failing itself (etcd down behind it).
func (g *Guard) noteUnavailable(msg string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.unavailable) < maxUnavailable {
		g.unavailable = append(g.unavailable, msg)
	}
}

// SawUnavailable reports whether an action's error message includes a failure worth
// retrying that the guard saw: Helm's kube client joins the errors of an update as text.
func (g *Guard) SawUnavailable(errText string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, m := range g.unavailable {
		if strings.Contains(errText, m) {
			return true
		}
	}
	return false
}

// Outcome returns what the guard saw: the requests it refused and those the API server refused.
func (g *Guard) Outcome() ([]Violation, []string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]Violation(nil), g.refused...), append([]string(nil), g.forbidden...)
}

// checkOwned reads the object a mutating request is about, through rt. It returns the
// violation when the object is not the release's, or the read's own answer when that failed
// (the caller hands it on); (nil, nil) lets the request go on (a delete now carries the
// object's UID as a precondition). An object that does not exist is left to the request,
// which fails on it.
func (g *Guard) checkOwned(req *http.Request, rt http.RoundTripper, info *apirequest.RequestInfo) (*Violation, *http.Response, error) {
	get := req.Clone(req.Context())
	get.Method, get.Body, get.GetBody, get.ContentLength = http.MethodGet, nil, nil, 0
	get.URL.RawQuery = ""
	get.Header.Del("Content-Type")
	get.Header.Set("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json")
	resp, err := rt.RoundTrip(get)
	if err != nil {
		return nil, nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		drain(resp)
		return nil, nil, nil
	case resp.StatusCode != http.StatusOK:
		return nil, resp, nil
	}
	var live metav1.PartialObjectMetadata
	err = json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&live)
	drain(resp)
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s before %s: %w", req.URL.Path, info.Verb, err)
	}
	if why := NotMadeBy(live.GetAnnotations(), g.owner); why != "" {
		return &Violation{Source: SourceRequest, Verb: info.Verb, Kind: g.kindOf(gvrOf(info)).Kind, Name: info.Name,
			Namespace: info.Namespace, Why: why}, nil, nil
	}
	if info.Verb == "delete" {
		return nil, nil, withUIDPrecondition(req, live.GetUID())
	}
	return nil, nil, nil
}
