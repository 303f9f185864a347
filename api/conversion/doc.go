// Package conversion converts DynamoGraphDeployments between v1alpha1 and v1beta1 (the
// hub), as Dynamo's operator does (DYNAMO-V1BETA1.md §2; api/v1beta1's doc says where
// and why this one differs): ToHub and FromHub, the /convert converter the manager
// serves (Converter), and the client the operator, the plugin and tests use to read and
// write v1alpha1 objects as v1beta1 (Client). Conversion is stateless: an object
// converts from itself alone.
package conversion
