package records

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	hrelease "helm.sh/helm/v4/pkg/release"
	release "helm.sh/helm/v4/pkg/release/v1"
	"helm.sh/helm/v4/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func NewDriver(impl corev1client.SecretInterface) *Driver {
	impl = storedRecords{impl}
	return &Driver{Secrets: driver.NewSecrets(impl), impl: impl, unsure: map[string]bool{}}
}

// Track makes the drivers made for actions and reads (WithContext) keep in w what they write
// of the records of namespace ns, the driver's, so that CachedHead reads it before the cache of
// records shows it.
func (d *Driver) Track(ns string, w *Written) { d.written, d.writtenNS = w, ns }

// Records is the Secrets client of the namespace's release records: Get and List see only
// the records rudder's storage writes (see IsStoredRecord).
func (d *Driver) Records() corev1client.SecretInterface { return d.impl }

// WithContext is d for one action or read: every request made in ctx (Helm's driver makes its
// own in context.Background), so that a pass's reads of storage end with the pass, and each
// record read by name once in ctx's memo (see WithMemo), else in this driver's.
func (d *Driver) WithContext(ctx context.Context) *Driver {
	bound := newMemoSecrets(boundSecrets{SecretInterface: d.impl, ctx: ctx}, memoOf(ctx), d.MemoKey)
	bound.written, bound.writtenNS = d.written, d.writtenNS
	nd := &Driver{Secrets: driver.NewSecrets(bound), impl: bound, namespace: d.namespace, mode: d.mode, own: d.own, foreign: d.foreign,
		unsure: map[string]bool{}, MemoKey: d.MemoKey, written: d.written, writtenNS: d.writtenNS}
	nd.SetLogger(d.Logger().Handler())
	return nd
}

// boundSecrets makes every request of a Secrets client in ctx, whatever context its caller
// passes.
type boundSecrets struct {
	corev1client.SecretInterface
	ctx context.Context
}

func (b boundSecrets) Get(_ context.Context, name string, o metav1.GetOptions) (*corev1.Secret, error) {
	return b.SecretInterface.Get(b.ctx, name, o)
}

func (b boundSecrets) List(_ context.Context, o metav1.ListOptions) (*corev1.SecretList, error) {
	return b.SecretInterface.List(b.ctx, o)
}

func (b boundSecrets) Create(_ context.Context, s *corev1.Secret, o metav1.CreateOptions) (*corev1.Secret, error) {
	return b.SecretInterface.Create(b.ctx, s, o)
}

func (b boundSecrets) Update(_ context.Context, s *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	return b.SecretInterface.Update(b.ctx, s, o)
}

func (b boundSecrets) Delete(_ context.Context, name string, o metav1.DeleteOptions) error {
	return b.SecretInterface.Delete(b.ctx, name, o)
}

func (b boundSecrets) Patch(_ context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions,
	sub ...string) (*corev1.Secret, error) {
	return b.SecretInterface.Patch(b.ctx, name, pt, data, o, sub...)
}

// WithQueries is d answering mode's queries of namespace ns from the caches own and foreign.
func (d *Driver) WithQueries(mode QueryMode, ns string, own, foreign client.Reader) *Driver {
	return &Driver{Secrets: d.Secrets, impl: d.impl, namespace: ns, mode: mode, own: own, foreign: foreign, unsure: map[string]bool{},
		MemoKey: d.MemoKey,
		written: d.written, writtenNS: d.writtenNS}
}

// storedRecords is the Secrets of a namespace as rudder's release storage sees them: only
// records its storage could have written. A Secret a release rendered carries the managed label
// (the post-renderer and the hook marks put it on everything a chart renders, and rendering a
// record-shaped object is refused anyway), and one that is not of Helm's record type was not
// written by Helm's storage either: neither is ever read as a revision, whatever its name and
// labels say.
type storedRecords struct{ corev1client.SecretInterface }

// IsStoredRecord reports whether a Secret may be a record rudder's storage wrote.
func IsStoredRecord(s *corev1.Secret) bool {
	return s.Type == RecordType && IsReleaseRecord(s.Labels) && s.Annotations[AnnotationOwner] == ""
}

func (s storedRecords) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Secret, error) {
	obj, err := s.SecretInterface.Get(ctx, name, opts)
	if err == nil && !IsStoredRecord(obj) {
		return nil, apierrors.NewNotFound(corev1.Resource("secrets"), name)
	}
	return obj, err
}

func (s storedRecords) List(ctx context.Context, opts metav1.ListOptions) (*corev1.SecretList, error) {
	list, err := s.SecretInterface.List(ctx, opts)
	if err != nil {
		return list, err
	}
	kept := list.Items[:0]
	for i := range list.Items {
		if IsStoredRecord(&list.Items[i]) {
			kept = append(kept, list.Items[i])
		}
	}
	list.Items = kept
	return list, nil
}

// Query finds the records with labels (see QueryMode); a failure is remembered for the
// release name it was about.
func (d *Driver) Query(labels map[string]string) ([]hrelease.Releaser, error) {
	rls, err := d.queryV1(labels)
	return releasers(rls, err)
}

// queryV1 is Query's records, as v1 releases.
func (d *Driver) queryV1(labels map[string]string) ([]*release.Release, error) {
	rls, err := d.query(labels)
	if name := labels["name"]; name != "" {
		d.mu.Lock()
		if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
			d.unsure[name] = true
		} else {
			delete(d.unsure, name)
		}
		d.mu.Unlock()
	}
	return rls, err
}

// Create stores a new record; ErrReleaseExists when the Secret exists, or when it is a first
// revision of a name that has other revisions.
func (d *Driver) Create(key string, r hrelease.Releaser) error {
	rls, err := V1(r)
	if err != nil {
		return err
	}
	if rls.Version == 1 {
		d.mu.Lock()
		unsure := d.unsure[rls.Name]
		d.mu.Unlock()
		if unsure {
			hist, err := d.queryV1(map[string]string{"name": rls.Name, "owner": "helm"})
			switch {
			case err == nil && len(hist) > 0:
				return driver.ErrReleaseExists
			case err != nil && !errors.Is(err, driver.ErrReleaseNotFound):
				return fmt.Errorf("create: checking that release %q is new: %w", rls.Name, err)
			}
		}
	}
	obj, err := releaseSecret(key, rls, "createdAt")
	if err != nil {
		return fmt.Errorf("create: failed to encode release %q: %w", rls.Name, err)
	}
	if _, err := d.impl.Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return driver.ErrReleaseExists
		}
		return fmt.Errorf("create: failed to create: %w", err)
	}
	return nil
}

// Update replaces a record.
func (d *Driver) Update(key string, r hrelease.Releaser) error {
	rls, err := V1(r)
	if err != nil {
		return err
	}
	obj, err := releaseSecret(key, rls, "modifiedAt")
	if err != nil {
		return fmt.Errorf("update: failed to encode release %q: %w", rls.Name, err)
	}
	if _, err := d.impl.Update(context.Background(), obj, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update: failed to update: %w", err)
	}
	return nil
}

// releaseSecret is the Secret Helm 3 and Helm 4 store a revision in: the release's own labels, a
// timestamp label (createdAt or modifiedAt, as Helm sets on create and update), and the labels
// Helm queries by.
func releaseSecret(key string, rls *release.Release, stamp string) (*corev1.Secret, error) {
	payload, err := encodeRelease(rls)
	if err != nil {
		return nil, err
	}
	lbs := make(map[string]string, len(rls.Labels)+5)
	for k, v := range rls.Labels {
		lbs[k] = v
	}
	lbs[stamp] = strconv.FormatInt(time.Now().Unix(), 10)
	lbs["name"] = rls.Name
	lbs["owner"] = "helm"
	lbs["status"] = rls.Info.Status.String()
	lbs["version"] = strconv.Itoa(rls.Version)
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: key, Labels: lbs},
		Type:       "helm.sh/release.v1",
		Data:       map[string][]byte{"release": payload},
	}, nil
}

// bigRecord is the compressed size over which a record is compressed again, harder.
const bigRecord = 256 << 10

var gzipWriters = [...]*sync.Pool{
	gzip.BestSpeed:       {New: func() any { return mustGzipWriter(gzip.BestSpeed) }},
	gzip.BestCompression: {New: func() any { return mustGzipWriter(gzip.BestCompression) }},
}

func mustGzipWriter(level int) *gzip.Writer {
	w, err := gzip.NewWriterLevel(nil, level)
	if err != nil {
		panic(err) // only for a level that does not exist
	}
	return w
}

// encodeRelease is base64(gzip(json(release))), Helm's record payload.
func encodeRelease(rls *release.Release) ([]byte, error) {
	raw, err := json.Marshal(rls)
	if err != nil {
		return nil, err
	}
	zipped, err := gzipAt(gzip.BestSpeed, raw)
	if err == nil && zipped.Len() > bigRecord {
		zipped, err = gzipAt(gzip.BestCompression, raw)
	}
	if err != nil {
		return nil, err
	}
	out := make([]byte, base64.StdEncoding.EncodedLen(zipped.Len()))
	base64.StdEncoding.Encode(out, zipped.Bytes())
	return out, nil
}

func gzipAt(level int, raw []byte) (*bytes.Buffer, error) {
	var buf bytes.Buffer
	w := gzipWriters[level].Get().(*gzip.Writer)
	defer gzipWriters[level].Put(w)
	w.Reset(&buf)
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return &buf, nil
}
