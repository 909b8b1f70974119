package records

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Memo is what one pass (or one action) read and wrote of release records, by the driver's
// namespace and identity (Driver.MemoKey) and the record's name: each record is read from the API server once, and what the pass writes is
// what it
// reads after. A pass reads the release's newest revision before it decides, then Helm's
// upgrade asks storage for the last revision, then for the deployed one, then (with a history
// limit) for the whole history; each query reads the same records again, and looks once more
// for the revision after the newest, which is not there. Within one pass those reads answer
// the same, so one request does for all.
//
// A read is the record as the pass saw it first, or as it wrote it: what another writer
// changes meanwhile is not seen by it, as it would not be by a pass that read everything
// first (rudder runs one operation at a time per release). Every read is a deep copy, as a
// fresh decode from the API server is.
type Memo struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]*corev1.Secret // Namespace: the MemoKey; nil: not there
}

type memoKey struct{}

// WithMemo is ctx with a Memo of its own: the records read and written by every driver made for
// ctx (Driver.WithContext) until it ends.
func WithMemo(ctx context.Context) context.Context {
	return context.WithValue(ctx, memoKey{}, &Memo{seen: map[types.NamespacedName]*corev1.Secret{}})
}

// memoOf is ctx's Memo, or a new one for the driver alone.
func memoOf(ctx context.Context) *Memo {
	if m, ok := ctx.Value(memoKey{}).(*Memo); ok {
		return m
	}
	return &Memo{seen: map[types.NamespacedName]*corev1.Secret{}}
}

// memoSecrets is the records' Secrets client of one namespace and identity (scope: their
// MemoKey) that reads and writes through a Memo.
type memoSecrets struct {
	corev1client.SecretInterface
	memo  *Memo
	scope string
	// written, when set, keeps every write of a record of namespace writtenNS beyond the pass.
	written   *Written
	writtenNS string
}

func newMemoSecrets(inner corev1client.SecretInterface, memo *Memo, scope string) *memoSecrets {
	return &memoSecrets{SecretInterface: inner, memo: memo, scope: scope}
}

func (m *memoSecrets) key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: m.scope, Name: name}
}

func (m *memoSecrets) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	if opts.ResourceVersion != "" {
		return m.SecretInterface.Get(ctx, name, opts)
	}
	m.memo.mu.Lock()
	s, ok := m.memo.seen[m.key(name)]
	m.memo.mu.Unlock()
	switch {
	case ok && s == nil:
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	case ok:
		return s.DeepCopy(), nil
	}
	s, err := m.SecretInterface.Get(ctx, name, opts)
	switch {
	case err == nil:
		m.remember(name, s)
	case apierrors.IsNotFound(err):
		m.remember(name, nil)
	}
	return s, err
}

func (m *memoSecrets) Create(ctx context.Context, s *corev1.Secret, opts metav1.CreateOptions) (*corev1.Secret, error) {
	out, err := m.SecretInterface.Create(ctx, s, opts)
	m.wrote(s.Name, out, err, opts.DryRun)
	return out, err
}

func (m *memoSecrets) Update(ctx context.Context, s *corev1.Secret, opts metav1.UpdateOptions) (*corev1.Secret, error) {
	out, err := m.SecretInterface.Update(ctx, s, opts)
	m.wrote(s.Name, out, err, opts.DryRun)
	return out, err
}

func (m *memoSecrets) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions,
	sub ...string) (*corev1.Secret, error) {
	out, err := m.SecretInterface.Patch(ctx, name, pt, data, opts, sub...)
	m.wrote(name, out, err, opts.DryRun)
	return out, err
}

func (m *memoSecrets) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	err := m.SecretInterface.Delete(ctx, name, opts)
	if m.written != nil && err == nil && len(opts.DryRun) == 0 {
		m.written.deleted(m.writtenNS, name)
	}
	m.memo.mu.Lock()
	defer m.memo.mu.Unlock()
	if err == nil && len(opts.DryRun) == 0 {
		m.memo.seen[m.key(name)] = nil
	} else {
		delete(m.memo.seen, m.key(name))
	}
	return err
}

func (m *memoSecrets) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, list metav1.ListOptions) error {
	m.memo.mu.Lock()
	for k := range m.memo.seen {
		if k.Namespace == m.scope {
			delete(m.memo.seen, k)
		}
	}
	m.memo.mu.Unlock()
	return m.SecretInterface.DeleteCollection(ctx, opts, list)
}

// remember keeps what a read found (nil: not there).
func (m *memoSecrets) remember(name string, s *corev1.Secret) {
	m.memo.mu.Lock()
	defer m.memo.mu.Unlock()
	if s != nil {
		s = s.DeepCopy()
	}
	m.memo.seen[m.key(name)] = s
}

// wrote keeps what a write stored, as the API server answered it; a write that failed, or was
// only tried, leaves the record to be read again.
func (m *memoSecrets) wrote(name string, out *corev1.Secret, err error, dryRun []string) {
	if err == nil && out != nil && len(dryRun) == 0 {
		m.remember(name, out)
		if m.written != nil {
			m.written.wrote(out, m.writtenNS)
		}
		return
	}
	m.memo.mu.Lock()
	delete(m.memo.seen, m.key(name))
	m.memo.mu.Unlock()
}
