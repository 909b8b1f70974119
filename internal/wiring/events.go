package wiring

import (
	"context"
	"fmt"

	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/rudder-operator/rudder/internal/helm"
)

// eventRecorder records the Events of rudder's reconcilers (events.k8s.io/v1, reporting
// controller "rudder") as controller-runtime's recorder would, but sends them in protobuf, as
// Kubernetes' own controllers do: controller-runtime's sends JSON, and encoding the Event and
// decoding the answer was two percent of rudder's CPU per install (one Event each). The
// manager's own Events (leader election) keep its recorder. mgr is mgr with the recorder: it
// records from now on, and stops once the manager has stopped, so that the Events of passes
// that end while it stops are sent.
func eventRecorder(cfg *rest.Config, mgr manager.Manager) (events.EventRecorder, manager.Manager, error) {
	c, err := eventsv1client.NewForConfigAndClient(helm.ProtobufConfig(cfg), mgr.GetHTTPClient())
	if err != nil {
		return nil, nil, fmt.Errorf("events client: %w", err)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: c})
	ctx, cancel := context.WithCancel(context.Background())
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("recording events: %w", err)
	}
	return b.NewRecorder(mgr.GetScheme(), "rudder"), recordingManager{Manager: mgr, stop: func() {
		b.Shutdown()
		cancel()
	}}, nil
}

// recordingManager stops the recorder when the manager has stopped.
type recordingManager struct {
	manager.Manager
	stop func()
}

func (m recordingManager) Start(ctx context.Context) error {
	defer m.stop()
	return m.Manager.Start(ctx)
}
