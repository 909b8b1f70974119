package wiring

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/rudder-operator/rudder/internal/helm"
	"github.com/rudder-operator/rudder/internal/machine"
	"github.com/rudder-operator/rudder/internal/watches"
)

// Sources reads the valuesFrom sources of CRs — Secrets and ConfigMaps of each CR's own
// namespace — as the identity of the CR's release (impersonating the watch's ServiceAccount),
// and watches each source that some CR reads, alone: a list and watch of that one object, by
// name. So only what is read is cached (unrelated Secrets cost nothing), an idle pass reads
// its sources from memory, and a change of a source wakes exactly the CRs that read it. A
// source no CR reads any more is dropped.
type Sources struct {
	cfg *rest.Config
	log logr.Logger

	mu      sync.Mutex
	clients map[string]kubernetes.Interface // by the user acting ("": rudder)
	watches map[sourceID]*sourceWatch
	read    map[machine.SourceUser]map[sourceID]bool // what each CR read last
	stopped bool                                     // the manager stopped: no new watches
}

// NewSources reads and watches sources through cfg, rudder's own identity.
func NewSources(cfg *rest.Config, log logr.Logger) *Sources {
	return &Sources{cfg: cfg, log: log, clients: map[string]kubernetes.Interface{}, watches: map[sourceID]*sourceWatch{},
		read: map[machine.SourceUser]map[sourceID]bool{}}
}

// sourceID is one object as one identity reads it.
type sourceID struct {
	user, kind, namespace, name string
}

// sourceWatch is the watch on one source.
type sourceWatch struct {
	informer cache.SharedIndexInformer
	stop     chan struct{}
	readers  map[machine.SourceUser]bool
}

// Read returns what each source holds for the CR rdr (nil: the object or the key is missing),
// as the scope's identity, and records that the CR reads them (and no others).
func (s *Sources) Read(ctx context.Context, scope helm.Scope, srcs []watches.Source, rdr machine.SourceUser) ([][]byte, error) {
	ids := make(map[sourceID]bool, len(srcs))
	out := make([][]byte, len(srcs))
	for i, src := range srcs {
		id := sourceID{user: scope.User(), kind: src.Kind, namespace: src.Namespace, name: src.Name}
		ids[id] = true
		obj, err := s.get(ctx, id)
		if err != nil {
			s.setRead(rdr, ids)
			return nil, fmt.Errorf("reading %s as %s: %w", src, userOf(id.user), err)
		}
		if m, ok := obj.(metav1.Object); ok && src.For != "" && !watches.Claims(m.GetAnnotations()[watches.AnnotationValuesFor], src.For) {
			s.setRead(rdr, ids)
			return nil, &watches.UnclaimedError{Source: src}
		}
		out[i] = contentOf(obj, src.Key)
	}
	s.setRead(rdr, ids)
	return out, nil
}

// Start runs until ctx is done, then stops every watch: a manager Runnable, so that the
// source watches end with the manager. Reads before Start work.
func (s *Sources) Start(ctx context.Context) error {
	<-ctx.Done()
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, w := range s.watches {
		close(w.stop)
		delete(s.watches, id)
	}
	s.stopped = true
	return nil
}

// NeedLeaderElection is false: a replica that is not the leader reads no sources anyway.
func (s *Sources) NeedLeaderElection() bool { return false }

// Forget drops what the CR read (it is gone, or reads no sources any more).
func (s *Sources) Forget(rdr machine.SourceUser) {
	s.setRead(rdr, nil)
}

func userOf(u string) string {
	if u == "" {
		return "rudder"
	}
	return u
}

// get is the source's object (nil: not found): from its watch's cache once that has synced,
// else with a request of its own. The first read of a source starts its watch.
func (s *Sources) get(ctx context.Context, id sourceID) (runtime.Object, error) {
	w, cs, err := s.watch(id)
	if err != nil {
		return nil, err
	}
	if w.informer.HasSynced() {
		obj, ok, err := w.informer.GetStore().GetByKey(id.namespace + "/" + id.name)
		if err != nil || !ok {
			return nil, err
		}
		return obj.(runtime.Object), nil
	}
	var obj runtime.Object
	if id.kind == "Secret" {
		obj, err = cs.CoreV1().Secrets(id.namespace).Get(ctx, id.name, metav1.GetOptions{})
	} else {
		obj, err = cs.CoreV1().ConfigMaps(id.namespace).Get(ctx, id.name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return obj, err
}

// watch is the watch on a source, started on first use, and the client of its identity.
func (s *Sources) watch(id sourceID) (*sourceWatch, kubernetes.Interface, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs, ok := s.clients[id.user]
	if !ok {
		cfg := rest.CopyConfig(s.cfg)
		if id.user != "" {
			cfg.Impersonate = rest.ImpersonationConfig{UserName: id.user}
		}
		var err error
		if cs, err = kubernetes.NewForConfig(helm.ProtobufConfig(cfg)); err != nil {
			return nil, nil, err
		}
		s.clients[id.user] = cs
	}
	if w, ok := s.watches[id]; ok {
		return w, cs, nil
	}
	if s.stopped {
		return nil, nil, errors.New("values sources: stopped with the manager")
	}
	resource, obj := "configmaps", runtime.Object(&corev1.ConfigMap{})
	if id.kind == "Secret" {
		resource, obj = "secrets", &corev1.Secret{}
	}
	lw := cache.NewListWatchFromClient(cs.CoreV1().RESTClient(), resource, id.namespace, fields.OneTermEqualSelector("metadata.name", id.name))
	w := &sourceWatch{informer: cache.NewSharedIndexInformer(lw, obj, 0, cache.Indexers{}), stop: make(chan struct{}),
		readers: map[machine.SourceUser]bool{}}
	_ = w.informer.SetTransform(func(o any) (any, error) {
		if m, ok := o.(metav1.Object); ok {
			m.SetManagedFields(nil)
			// Of the annotations, only the claim of AnnotationValuesFor is read.
			claim, claimed := m.GetAnnotations()[watches.AnnotationValuesFor]
			m.SetAnnotations(nil)
			if claimed {
				m.SetAnnotations(map[string]string{watches.AnnotationValuesFor: claim})
			}
		}
		return o, nil
	})
	_ = w.informer.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		s.log.V(1).Info("watching a values source failed; retrying", "source", id.kind+" "+id.namespace+"/"+id.name, "as", userOf(id.user),
			"error", err.Error())
	})
	if _, err := w.informer.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(_ any, initial bool) {
			if !initial {
				s.changed(id)
			}
		},
		UpdateFunc: func(old, cur any) {
			if old.(metav1.Object).GetResourceVersion() != cur.(metav1.Object).GetResourceVersion() {
				s.changed(id)
			}
		},
		DeleteFunc: func(any) { s.changed(id) },
	}); err != nil {
		return nil, nil, err
	}
	go w.informer.Run(w.stop)
	s.watches[id] = w
	return w, cs, nil
}

// changed wakes the CRs that read the source.
func (s *Sources) changed(id sourceID) {
	s.mu.Lock()
	var rdrs []machine.SourceUser
	if w, ok := s.watches[id]; ok {
		for r := range w.readers {
			rdrs = append(rdrs, r)
		}
	}
	s.mu.Unlock()
	for _, rdr := range rdrs {
		rdr.Queue.SourceChanged(rdr.Key)
	}
}

// setRead records that the CR reads exactly ids, and stops the watches no CR reads.
func (s *Sources) setRead(rdr machine.SourceUser, ids map[sourceID]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := range s.read[rdr] {
		if ids[id] {
			continue
		}
		if w, ok := s.watches[id]; ok {
			delete(w.readers, rdr)
			if len(w.readers) == 0 {
				close(w.stop)
				delete(s.watches, id)
			}
		}
	}
	for id := range ids {
		if w, ok := s.watches[id]; ok {
			w.readers[rdr] = true
		}
	}
	if len(ids) == 0 {
		delete(s.read, rdr)
		return
	}
	s.read[rdr] = ids
}

// contentOf is the content of a key of a Secret or ConfigMap (nil: none).
func contentOf(obj runtime.Object, key string) []byte {
	switch o := obj.(type) {
	case *corev1.Secret:
		if b, ok := o.Data[key]; ok {
			return b
		}
	case *corev1.ConfigMap:
		if v, ok := o.Data[key]; ok {
			return []byte(v)
		}
		if b, ok := o.BinaryData[key]; ok {
			return b
		}
	}
	return nil
}

var _ machine.SourceReader = (*Sources)(nil)
