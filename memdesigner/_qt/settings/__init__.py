"""The run-settings bar and its panels: number fields, fine-tuning, generation and parallelism options."""
