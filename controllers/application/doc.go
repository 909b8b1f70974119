// Package application holds the Go hooks of the Application kind (apps.sunstrider.cn/v1): the
// CR's labels go into the chart values, and the live Deployment's and Service's status are
// mirrored into status.workflow and status.network. It owns those two status fields only.
package application
