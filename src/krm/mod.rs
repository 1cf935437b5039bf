//! The KRM function protocol: the [`resource_list`] a host sends and reads
//! back, the [`results`] a function reports, and the [`function_config`] that
//! configures it (a typed settings object or a ConfigMap), with the readers
//! of settings every kind shares. It knows no rule set.

pub mod function_config;
pub mod resource_list;
pub mod results;
