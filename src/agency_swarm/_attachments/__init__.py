"""Images and files in messages: the SDK's content parts built and checked, their bytes split off to be stored once
(content-addressed), and references resolved into what the model API takes. Below the threads: no store, no turn."""
