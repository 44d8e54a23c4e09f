package mirror

import "google.golang.org/grpc/status"

// statusMessage is the message of a gRPC status error (the one line for
// the user), or the error itself.
func statusMessage(err error) string {
	if s, ok := status.FromError(err); ok {
		return s.Message()
	}
	return err.Error()
}
